"""Fix: vLLM serves each DFlash-family draft layer causal or bidirectional as it trained.

Why: vLLM 0.32 reads one causality flag for every DFlash layer (docs/upstream.md, "Serving a
drafter in vLLM"). Targets: ``save_pretrained`` (saves the flag that fits), ``run_training``
(refuses a mix no config describes). Retire when vLLM reads per-layer causality.
"""

from __future__ import annotations

import logging
from typing import Any

from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.core.fix import Fix, Patcher
from speculators_qwen_compat.core.targets import ReleaseRange, Resolved, Shape, Target
from speculators_qwen_compat.core.upstream import SPECULATOR_MODEL, TRAINER
from speculators_qwen_compat.fixes.training import stages
from speculators_qwen_compat.training import served_drafter as sd

log = logging.getLogger("speculators_qwen_compat")

SAVE_PRETRAINED = Target(SPECULATOR_MODEL, "SpeculatorModel.save_pretrained")
RUN_TRAINING = Target(TRAINER, "Trainer.run_training")


class ServedAttentionFix(Fix):
    name = "served_attention"
    summary = "DFlash-family drafters are saved so vLLM serves each layer as it trained"
    modules = (SPECULATOR_MODEL, TRAINER)
    shapes = (
        Shape(
            "block drafters are saved with the causality vLLM reads; unservable ones refused",
            (SAVE_PRETRAINED, RUN_TRAINING),
        ),
    )
    applies_on = ReleaseRange("0.5.0", "0.9.0")

    def apply(self, found: Resolved, patcher: Patcher) -> None:
        if found.here(SAVE_PRETRAINED):
            stages.wrap(found, patcher, SAVE_PRETRAINED, self.name, _save_pretrained)
        if found.here(RUN_TRAINING):
            stages.wrap(found, patcher, RUN_TRAINING, self.name, _run_training)


def config_dict(model: Any) -> dict[str, Any]:
    """The drafter's config as its config.json will hold it."""
    config = getattr(model, "config", None)
    return config.to_dict() if hasattr(config, "to_dict") else {}


def _save_pretrained(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    config = getattr(instance, "config", None)
    try:
        fields = sd.attention_for_serving(config_dict(instance)) or {}
    except Exception as exc:  # never break a save
        log.warning("served_attention fix skipped for %s: %s", type(instance).__name__, exc)
        fields = {}
    saved = {k: getattr(config, k) for k in fields}
    for key, value in fields.items():
        setattr(config, key, value)
    if fields:
        log.warning(
            "%s: every draft layer trained bidirectional within the block; saved with "
            "sliding_window_non_causal true so vLLM serves them so (speculators_qwen_compat fix "
            "served_attention)",
            type(instance).__name__,
        )
    try:
        return wrapped(*args, **kwargs)
    finally:
        for key, value in saved.items():
            setattr(config, key, value)


def _run_training(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    model = getattr(instance, "model", None)
    model = getattr(model, "module", model)  # DistributedDataParallel
    mismatch = sd.attention_mismatch(config_dict(model)) if model is not None else ""
    if mismatch:
        raise CompatError(mismatch)
    return wrapped(*args, **kwargs)
