"""Fix: training starts without ``--mask-token-id`` when the verifier's processor cannot be built.

Target: ``load_processor`` as ``speculators.train.utils`` binds it (0.6+); a Qwen3.5/3.6 folder
without processor files or torchvision fails there (docs/upstream.md, "Training"). On those errors
only the folder's tokenizer is returned, so ``resolve_mask_token_id`` gives the same id.
"""

from __future__ import annotations

import logging
from typing import Any

from speculators_qwen_compat.core.errors import reason_of
from speculators_qwen_compat.core.fix import Fix, Patcher, not_needed
from speculators_qwen_compat.core.targets import (
    ReleaseRange,
    Resolved,
    Shape,
    Target,
    present,
)
from speculators_qwen_compat.core.upstream import TRAIN_UTILS, bind

log = logging.getLogger("speculators_qwen_compat")

#: What AutoProcessor raises when the processor alone cannot be built.
PROCESSOR_ERRORS = (OSError, ImportError, ValueError)


#: The name ``speculators.train.utils`` binds; its one caller is ``resolve_mask_token_id``.
LOAD_PROCESSOR = Target(TRAIN_UTILS, "load_processor", params=("target_model_path",))
GET_TOKENIZER = Target(TRAIN_UTILS, "get_tokenizer")


class MaskTokenFix(Fix):
    name = "mask_token"
    summary = "resolve the draft mask token from the tokenizer when no processor can be built"
    modules = (TRAIN_UTILS,)
    shapes = (
        Shape(
            "resolve_mask_token_id falls back to the tokenizer when AutoProcessor cannot be built",
            (LOAD_PROCESSOR, GET_TOKENIZER),
            when=(
                present(TRAIN_UTILS, "resolve_mask_token_id"),
                present(TRAIN_UTILS, LOAD_PROCESSOR.path),
            ),
        ),
    )
    otherwise = not_needed(
        "this release resolves the mask token through AutoTokenizer (or resolves none)"
    )
    applies_on = ReleaseRange("0.6.0.2", "0.9.0")

    def apply(self, found: Resolved, patcher: Patcher) -> None:
        def load_processor(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            try:
                return wrapped(*args, **kwargs)
            except PROCESSOR_ERRORS as exc:
                arguments = bind(wrapped, args, kwargs).arguments
                trust = bool(arguments.get("trust_remote_code", False))
                tokenizer = tokenizer_instead(arguments["target_model_path"], trust, exc)
                if tokenizer is None:
                    raise
                return tokenizer

        patcher.wrap(*found.owner_and_name(LOAD_PROCESSOR), load_processor)


def tokenizer_instead(path: Any, trust_remote_code: bool, error: BaseException) -> Any:
    """The folder's tokenizer with its pad token resolved as upstream does, or None."""
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    except Exception:
        return None
    if len(tokenizer.get_vocab()) <= len(set(tokenizer.all_special_tokens)):
        return None  # no tokenizer files: transformers builds an empty one from the config
    if tokenizer.pad_token is None:  # upstream's _resolve_pad_token
        tokenizer.pad_token = tokenizer.eos_token
    log.warning(
        "the processor of %s cannot be built (%s: %s); the mask token id is resolved from its "
        "tokenizer instead (speculators_qwen_compat fix mask_token)",
        path,
        type(error).__name__,
        reason_of(error, limit=120),
    )
    return tokenizer
