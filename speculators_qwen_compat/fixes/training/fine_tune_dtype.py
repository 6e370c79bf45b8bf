"""Fix: ``--from-pretrained FOLDER`` fine-tunes in float32, as a fresh drafter trains.

Why: ``from_pretrained`` keeps the saved bf16: "expected m1 and m2 to have the same dtype" beside
float32 hidden states (docs/upstream.md, "Training: a drafter trained before the fixes"). Target:
0.8+'s ``build_draft_model``: a --save-path over FOLDER refused (training/save_path.py), a cast.
"""

from __future__ import annotations

import logging
from typing import Any

from speculators_qwen_compat.core.fix import Fix, Patcher
from speculators_qwen_compat.core.targets import ReleaseRange, Resolved, Shape, Target
from speculators_qwen_compat.core.upstream import TRAIN_CLI, bind
from speculators_qwen_compat.training.save_path import refuse_overlap

log = logging.getLogger("speculators_qwen_compat")

BUILD_DRAFT_MODEL = Target(TRAIN_CLI, "build_draft_model", params=("args",))


class FineTuneDtypeFix(Fix):
    name = "fine_tune_dtype"
    summary = "a drafter loaded with --from-pretrained trains in float32, as a fresh one does"
    modules = (TRAIN_CLI,)
    shapes = (
        Shape(
            "build_draft_model loads --from-pretrained in the saved dtype; cast to float32",
            (BUILD_DRAFT_MODEL,),
        ),
    )
    applies_on = ReleaseRange("0.8.1", "0.9.0")

    def apply(self, found: Resolved, patcher: Patcher) -> None:
        patcher.wrap(*found.owner_and_name(BUILD_DRAFT_MODEL), _build_draft_model)


def _build_draft_model(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    cli_args = bind(wrapped, args, kwargs).arguments["args"]
    source = getattr(cli_args, "from_pretrained", None)
    refuse_overlap(getattr(cli_args, "save_path", None), source)  # before it trains or cleans up
    model = wrapped(*args, **kwargs)
    if source:
        to_float32(model, str(source))
    return model


def to_float32(model: Any, source: str) -> None:
    """Casts ``model``'s floating parameters and buffers to float32 when any is not."""
    import torch

    kinds = {p.dtype for p in model.parameters() if p.is_floating_point()}
    if kinds <= {torch.float32}:
        return
    model.float()
    log.warning(
        "--from-pretrained %s loaded in %s; cast to float32 to train as a fresh drafter does "
        "(speculators_qwen_compat fix fine_tune_dtype)",
        source,
        "/".join(sorted(str(k).removeprefix("torch.") for k in kinds)),
    )
