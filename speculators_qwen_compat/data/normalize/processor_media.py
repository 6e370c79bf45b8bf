"""Image parts for the script generation (<= 0.7), which applies the template with the processor.

Why: transformers' processor reads a path but not a ``file://`` URL, a missing file counted as
"nothing to supervise", and a tokenizer-only run writes one pad per image silently
(docs/upstream.md, "Images on the processor path"). Here URLs become paths, the rest skips.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from speculators_qwen_compat.data.normalize.normalize import BadConversation
from speculators_qwen_compat.data.render.media import MISSING_FILE, local_path

#: The media a Qwen3.5/3.6 processor takes (audio has no processor there: left to upstream).
KINDS = ("image", "video")
NEEDS_PROCESSOR = (
    "image/video parts need the target's multimodal processor: this run loads a tokenizer, "
    "which renders one pad per image and reads no pixels (speculators 0.6+ load the processor "
    "when the checkpoint has a preprocessor_config.json and torchvision is installed)"
)


def kind_of(part: Any) -> str | None:
    """``image`` or ``video`` for a media part (``{"type": "image", ...}`` or the OpenAI
    ``{"type": "image_url", "image_url": {"url": ...}}``), else None."""
    if not isinstance(part, Mapping):
        return None
    kind = str(part.get("type") or "")
    kind = kind.removesuffix("_url")
    return kind if kind in KINDS else None


def source_of(part: Mapping[str, Any]) -> tuple[str, str] | None:
    """``("path", P)`` for a local file (a ``file://`` URL included), ``("url", U)`` for a
    remote one, None when the part names neither (inline data is refused by the normaliser)."""
    kind = kind_of(part)
    if kind is None:
        return None
    value: Any = part.get("path") or part.get("url")
    if value is None:
        value = part.get(f"{kind}_url")
        if isinstance(value, Mapping):
            value = value.get("url")
    if value is None and isinstance(part.get(kind), str):
        value = part[kind]
    if not isinstance(value, str) or not value:
        return None
    if value.startswith("file://"):
        return "path", str(local_path(value))  # as vLLM reads it (data/render/media.py)
    if "://" in value:
        return "url", value
    return "path", value


def media_parts(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every image/video part of the conversation, in order."""
    return [
        part
        for turn in conversation
        if isinstance(turn, Mapping) and isinstance(turn.get("content"), list)
        for part in turn["content"]
        if kind_of(part) is not None
    ]


def for_processor(conversation: list[dict[str, Any]], multimodal: bool) -> list[dict]:
    """The conversation as the target's processor takes it (the script generation applies the
    template with it): media parts as ``{"type": kind, "path": P}`` / ``{"type": kind, "url": U}``
    (what transformers' processor reads and upstream's ``_adapt_part_for_vllm`` turns into vLLM's
    ``*_url`` parts).
    Raises BadConversation when the run cannot give the processor's tokens for it."""
    if not media_parts(conversation):
        return conversation
    if not multimodal:
        raise BadConversation(NEEDS_PROCESSOR)
    out = []
    for turn in conversation:
        content = turn.get("content")
        if isinstance(content, list) and any(kind_of(part) for part in content):
            turn = {**turn, "content": [_local_part(part) for part in content]}
        out.append(turn)
    return out


def _local_part(part: Any) -> Any:
    kind = kind_of(part)
    if kind is None:
        return part
    source = source_of(part)
    if source is None:
        return part  # upstream names what it cannot read
    where, value = source
    if where == "path" and not os.path.isfile(value):
        raise BadConversation(MISSING_FILE)
    return {"type": kind, where: value}


def is_multimodal(processor: Any) -> bool:
    """True for a transformers processor (reads images), False for a tokenizer."""
    try:
        from transformers import ProcessorMixin
    except ImportError:
        return False
    return isinstance(processor, ProcessorMixin)
