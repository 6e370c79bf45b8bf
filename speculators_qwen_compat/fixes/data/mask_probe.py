"""Fix: the assistant-mask probe that kills prepare_data before it reads a row.

Target: ``_supports_assistant_mask`` (<= 0.7): a strict template's ``TemplateError`` escapes and
a processor's batched mask is misread (docs/upstream.md, "Mask probe"). Any error means "no HF
assistant mask"; the batch is unpacked in the probe and in ``_get_input_ids_loss_mask``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from speculators_qwen_compat.core.errors import reason_of
from speculators_qwen_compat.core.fix import Fix, Patcher, not_needed
from speculators_qwen_compat.core.targets import Found, ReleaseRange, Shape, Target, present
from speculators_qwen_compat.core.upstream import PREPROCESSING, bind

log = logging.getLogger("speculators_qwen_compat")

PROBE_CONVERSATION = [
    {"role": "user", "content": "test"},
    {"role": "assistant", "content": "test"},
]


PROBE = Target(PREPROCESSING, "_supports_assistant_mask", arity=1)
FALLBACK = present(PREPROCESSING, "_detect_assistant_pattern")
HF_MASK = Target(PREPROCESSING, "_get_input_ids_loss_mask", optional=True)
ADAPT = Target(PREPROCESSING, "_adapt_conv_for_hf", optional=True)


class MaskProbeFix(Fix):
    name = "mask_probe"
    summary = "probe for HF assistant masks with a well-formed conversation; never raise"
    modules = (PREPROCESSING,)
    shapes = (
        Shape(
            "the probe is replaced by one that never raises",
            (PROBE, FALLBACK, HF_MASK, ADAPT),
            when=(present(PREPROCESSING, PROBE.path),),
        ),
    )
    otherwise = not_needed("this release has no assistant-mask probe")
    applies_on = ReleaseRange("0.5.0", "0.7.0.2")

    def apply(self, found: Found, patcher: Patcher) -> None:
        adapt = found.get(ADAPT)

        def safe_probe(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> bool:
            (processor,) = bind(wrapped, args, kwargs).arguments.values()
            return supports_assistant_mask(adapt, processor)

        def unbatched(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            result = wrapped(*args, **kwargs)
            if isinstance(result, tuple) and len(result) == 2:
                return unbatch(result[0]), unbatch(result[1])
            return result

        patcher.wrap(*found.owner_and_name(PROBE), safe_probe)
        if found.has(HF_MASK):
            patcher.wrap(*found.owner_and_name(HF_MASK), unbatched)


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
