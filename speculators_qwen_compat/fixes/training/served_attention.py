"""Fix: vLLM serves each DFlash-family draft layer causal or bidirectional as it trained.

Targets: ``speculators.model.SpeculatorModel.save_pretrained`` (every save) and
``speculators.train.trainer.Trainer.run_training`` (the start of training), 0.5.0-0.9.0.

Why: speculators trains full-attention draft layers bidirectional within the block and sliding
layers causal unless ``sliding_window_non_causal``; vLLM 0.32 reads one flag for every layer of a
DFlash/DFlash2 drafter, ``causal = not sliding_window_non_causal``, and serves DSpark causal on
its sliding layers (training/served_drafter.py). A DFlash drafter with full-attention layers
(``--full-attention-indices``; every layer in 0.6, whose default is full attention) is served
causal where it trained bidirectional: no error, drafts from another model.

What it does: a DFlash/DFlash2 drafter trained bidirectional on every layer is saved with
``sliding_window_non_causal: true`` (no sliding layer reads it in training; vLLM then serves every
layer bidirectional); the model in memory keeps its config. A drafter no saved config can
describe (causal layers beside bidirectional ones) is refused before training starts, in one
line naming the flags that fit. Retire when vLLM reads per-layer causality from speculators
configs.
"""

from __future__ import annotations

import logging
from typing import Any

from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.core.fix import Fix, Patcher
from speculators_qwen_compat.core.targets import Found, ReleaseRange, Shape, Target
from speculators_qwen_compat.core.upstream import SPECULATOR_MODEL
from speculators_qwen_compat.fixes import route
from speculators_qwen_compat.training import served_drafter as sd

log = logging.getLogger("speculators_qwen_compat")

TRAINER = "speculators.train.trainer"
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

    def apply(self, found: Found, patcher: Patcher) -> None:
        if found.here(SAVE_PRETRAINED):
            route.wrap(found, patcher, SAVE_PRETRAINED, self.name, _save_pretrained)
        if found.here(RUN_TRAINING):
            route.wrap(found, patcher, RUN_TRAINING, self.name, _run_training)


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
