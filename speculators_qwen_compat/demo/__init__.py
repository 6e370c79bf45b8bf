"""The bundled default: a tiny Qwen3.6-style tokenizer and sample data, for ``make demo`` and tests.

``tiny-qwen36/`` is a byte-level BPE trained here (tools/build_demo_assets.py) with Qwen's chat
special tokens; ``write_model`` copies it with the Qwen3.6 (thinking on) or Qwen3.5-small
(thinking off) generation-prompt style.
"""

from __future__ import annotations

import shutil
from pathlib import Path

DEMO_DIR = Path(__file__).resolve().parent
MODEL_DIR = DEMO_DIR / "tiny-qwen36"
SHAREGPT_SAMPLE = DEMO_DIR / "sample_sharegpt.jsonl"
OPENAI_SAMPLE = DEMO_DIR / "sample_openai.jsonl"
TEMPLATE_SOURCE = DEMO_DIR / "strict_chat_template.jinja"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")

GENERATION_PROMPTS = {
    # Qwen3.6: thinking unless enable_thinking is false.
    "qwen36": "{%- if enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}"
    "{%- else %}{{ '<think>\\n' }}{%- endif %}",
    # Qwen3.5 small models: no thinking unless enable_thinking is true.
    "qwen35": "{%- if enable_thinking is true %}{{ '<think>\\n' }}"
    "{%- else %}{{ '<think>\\n\\n</think>\\n\\n' }}{%- endif %}",
}


def chat_template(style: str = "qwen36") -> str:
    source = TEMPLATE_SOURCE.read_text(encoding="utf-8")
    return source.replace("@@GENERATION_PROMPT@@", GENERATION_PROMPTS[style])


def write_model(destination: Path, style: str = "qwen36", template: str | None = None) -> Path:
    """A model folder holding the tiny tokenizer and a chat template (a style or given text)."""
    destination.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (MODEL_DIR / name).exists():
            shutil.copy(MODEL_DIR / name, destination / name)
    (destination / "chat_template.jinja").write_text(
        template if template is not None else chat_template(style), encoding="utf-8"
    )
    return destination
