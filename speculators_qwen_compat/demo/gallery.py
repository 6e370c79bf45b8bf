"""A gallery of strict chat templates besides the Qwen3.5/3.6 styles, written here.

Each uses the tiny tokenizer's ChatML framing and rejects some conversations with its own message
(``GALLERY_REJECTS``): ``alternation``, ``system_first``, ``generation_tags`` (<= 0.7's
assistant-mask path). ``demo.write_model(dest, template=gallery_template(name))`` uses one.
"""

from __future__ import annotations

from pathlib import Path

GALLERY_DIR = Path(__file__).resolve().parent / "gallery"
GALLERY: tuple[str, ...] = ("alternation", "system_first", "generation_tags")

#: The message each template raises for the conversations it rejects.
GALLERY_REJECTS: dict[str, str] = {
    "alternation": "Conversation roles must alternate user/assistant/user/assistant/...",
    "system_first": "Only the first message may have the system role.",
    "generation_tags": (
        "After an optional system message, the conversation must start with a user message."
    ),
}


def gallery_template(name: str) -> str:
    """The Jinja source of the gallery template ``name`` (one of ``GALLERY``)."""
    if name not in GALLERY:
        raise ValueError(f"no gallery template {name!r}; choose one of {', '.join(GALLERY)}")
    return (GALLERY_DIR / f"{name}.jinja").read_text(encoding="utf-8")
