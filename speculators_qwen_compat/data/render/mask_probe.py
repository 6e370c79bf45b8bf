"""The assistant-mask probe and a processor's batched mask, for releases that apply the template
themselves (<= 0.7): a strict template's ``TemplateError`` means "no HF assistant mask", and a
processor's one-entry batch is unpacked (docs/upstream.md, "Mask probe")."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from speculators_qwen_compat.core.errors import reason_of

log = logging.getLogger("speculators_qwen_compat")

PROBE_CONVERSATION = [
    {"role": "user", "content": "test"},
    {"role": "assistant", "content": "test"},
]


def unbatch(value: Any) -> Any:
    """A one-entry batch (``[[...]]`` or a tensor of shape (1, n)) -> its entry; else as is."""
    if hasattr(value, "dim"):
        return value[0] if value.dim() == 2 and value.shape[0] == 1 else value
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
        return value[0]
    return value


def supports_assistant_mask(adapt: Callable[..., Any] | None, processor: Any) -> bool:
    """True when the template's ``{% generation %}`` tags give a non-zero assistant mask.
    ``adapt``: the release's ``_adapt_conv_for_hf`` (0.6/0.7), else None."""
    conversation: Any = PROBE_CONVERSATION
    try:
        if adapt is not None:  # 0.6/0.7: a multimodal processor wants content parts
            conversation = adapt(PROBE_CONVERSATION, processor)
        encoded = processor.apply_chat_template(
            conversation,
            tokenize=True,
            return_assistant_tokens_mask=True,
            return_dict=True,
        )
        mask = encoded.get("assistant_masks", encoded.get("assistant_mask"))
    except Exception as exc:
        log.info("no HF assistant mask (%s); using speculators' pattern fallback", reason_of(exc))
        return False
    if mask is None:
        return False
    if hasattr(mask, "tolist"):
        mask = mask.tolist()
    if mask and isinstance(mask[0], list):  # a processor returns one mask per batch entry
        mask = [m for row in mask for m in row]
    return any(m == 1 for m in mask)
