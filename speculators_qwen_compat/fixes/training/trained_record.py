"""Fix: a drafter saved with the fixes on carries a record of what its weights trained with.

Why: upstream's folder cannot say whether the verifier norm was right (training/drafter_record.py).
Targets: ``from_pretrained`` (the weights' source), ``run_training`` (they train here),
``save_pretrained`` (the record beside config.json), read by ``doctor --drafter``.
"""

from __future__ import annotations

import json
import logging
from importlib.metadata import version
from pathlib import Path
from typing import Any

from speculators_qwen_compat.core.fix import Fix, Patcher
from speculators_qwen_compat.core.targets import ReleaseRange, Resolved, Shape, Target
from speculators_qwen_compat.core.upstream import SPECULATOR_MODEL, TRAINER
from speculators_qwen_compat.fixes.training import stages
from speculators_qwen_compat.fixes.training import verifier_norm as vn
from speculators_qwen_compat.fixes.training.served_attention import config_dict
from speculators_qwen_compat.training import drafter_record as dr
from speculators_qwen_compat.training import norm_convention as nc
from speculators_qwen_compat.training import norm_verdict
from speculators_qwen_compat.training import served_drafter as sd
from speculators_qwen_compat.training import upstream_norms as un

log = logging.getLogger("speculators_qwen_compat")

SAVE_PRETRAINED = Target(SPECULATOR_MODEL, "SpeculatorModel.save_pretrained")
FROM_PRETRAINED = Target(SPECULATOR_MODEL, "SpeculatorModel.from_pretrained")
RUN_TRAINING = Target(TRAINER, "Trainer.run_training")
#: Attributes this fix sets on a drafter instance: the folder it was loaded from (and that
#: folder's verdict), and the trainer training it in this process.
SOURCE = "_speculators_qwen_compat_source"
TRAINER_OF = "_speculators_qwen_compat_trainer"


class TrainedRecordFix(Fix):
    name = "trained_record"
    summary = "a saved drafter records its release, its verifier norm and the fixes that acted"
    modules = (SPECULATOR_MODEL, TRAINER)
    shapes = (
        Shape(
            "every save of a drafter leaves a record of what its weights trained with",
            (SAVE_PRETRAINED, FROM_PRETRAINED, RUN_TRAINING),
        ),
    )
    applies_on = ReleaseRange("0.5.0", "0.9.0")

    def apply(self, found: Resolved, patcher: Patcher) -> None:
        import wrapt

        if found.here(SAVE_PRETRAINED):
            stages.wrap(found, patcher, SAVE_PRETRAINED, self.name, _save_pretrained)
        if found.here(FROM_PRETRAINED):
            owner, attribute = found.owner_and_name(FROM_PRETRAINED)
            # the classmethod itself, so a subclass's call still binds the subclass
            descriptor = owner.__dict__.get(attribute, getattr(owner, attribute))
            patcher.replace(owner, attribute, wrapt.FunctionWrapper(descriptor, _from_pretrained))
        if found.here(RUN_TRAINING):
            stages.wrap(found, patcher, RUN_TRAINING, self.name, _run_training)


#: Files ``from_pretrained`` loads weights from: a local folder with none is config-only.
WEIGHT_GLOBS = ("*.safetensors", "*.bin", "*.pt", "*.pth")


def _from_pretrained(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    model = wrapped(*args, **kwargs)
    path = str(args[0] if args else kwargs.get("pretrained_model_name_or_path"))
    folder = Path(path)
    if folder.is_dir() and not any(any(folder.glob(g)) for g in WEIGHT_GLOBS):
        return model  # config-only: fresh weights, a built drafter
    try:
        verdict = source_verdict(folder, model)
    except Exception as exc:  # a record is never worth a failed load
        log.warning("trained_record: the verdict on %s is unknown: %s", path, exc)
        verdict = norm_verdict.NormVerdict(norm_verdict.UNKNOWN, f"not judged ({exc})")
    setattr(model, SOURCE, (path, verdict))
    if verdict.word != norm_verdict.RIGHT:
        log.warning(
            "%s: its weights are %s (%s); a norm fixed now acts on training from here, "
            "not on what they learned: retrain with the fixes on "
            "(speculators_qwen_compat fix trained_record)",
            path, verdict.word, verdict.why,
        )  # fmt: skip
    return model


def source_verdict(folder: Path, model: Any) -> norm_verdict.NormVerdict:
    """The verdict on the weights ``from_pretrained`` loaded from ``folder`` (a Hub id: unknown,
    its folder is not judged here)."""
    if not (folder / "config.json").is_file():
        return norm_verdict.NormVerdict(
            norm_verdict.UNKNOWN,
            f"loaded from {folder}, not a local folder with a config.json: not judged "
            "(`doctor --drafter` on a downloaded copy would tell)",
        )
    config = json.loads((folder / "config.json").read_text())
    return norm_verdict.judge(config, dr.read(folder), vn.verifier_types(model))


def resumed_from(trainer: Any) -> tuple[str, norm_verdict.NormVerdict] | None:
    """The epoch folder a resumed run's checkpointer loaded and its verdict (unknown unless it
    holds a record of ours), None for a run that did not resume."""
    checkpointer = getattr(trainer, "checkpointer", None)
    previous = getattr(checkpointer, "previous_epoch", -1)
    if not getattr(trainer, "resume_from_checkpoint", False) or previous in (-1, None):
        return None
    folder = Path(str(getattr(checkpointer, "path", "?"))) / str(previous)
    try:
        record = dr.read(folder)
        if record is not None:
            config = json.loads((folder / "config.json").read_text())
            return str(folder), norm_verdict.judge(config, record)
        why = f"resumed from {folder}, which holds no record of ours: what it trained with"
    except Exception as exc:  # the record still says it resumed
        why = f"resumed from {folder}, not judged ({exc}): what it trained with"
    return str(folder), norm_verdict.NormVerdict(norm_verdict.UNKNOWN, why + " is unknown")


def _run_training(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    model = getattr(instance, "model", None)
    model = getattr(model, "module", model)  # DistributedDataParallel
    if model is not None:
        setattr(model, TRAINER_OF, instance)
    return wrapped(*args, **kwargs)


def _save_pretrained(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    before = config_dict(instance)
    result = wrapped(*args, **kwargs)
    folder = Path(str(args[0] if args else kwargs.get("save_directory")))
    try:
        if (folder / "config.json").is_file():
            saved = json.loads((folder / "config.json").read_text())
            dr.write(folder, record_of(instance, before, saved))
    except Exception as exc:  # never break a save; never leave an older record beside it
        dr.remove(folder)
        log.warning("trained_record: no record written for %s: %s", type(instance).__name__, exc)
    return result


def record_of(model: Any, in_memory: dict[str, Any], saved: dict[str, Any]) -> dict[str, Any]:
    """The record of ``model`` as saved: release, norm it computes and the verifier's, upstream's
    norm for this release (the table), how its weights came to be, what the fixes changed."""
    release = version("speculators")
    kind = sd.speculator_type(saved)
    types = vn.verifier_types(model)
    norm = getattr(model, vn.ATTRIBUTE, None)
    verifier = nc.ONE_PLUS_WEIGHT if nc.uses_one_plus_weight(types) else nc.TIMES_WEIGHT
    source = getattr(model, SOURCE, None)
    trainer = getattr(model, TRAINER_OF, None)
    steps = int(getattr(trainer, "global_step", 0) or 0) if trainer is not None else 0
    kind_of_weights = dr.LOADED if source else dr.BUILT
    resumed = resumed_from(trainer) if trainer is not None else None
    if resumed:
        kind_of_weights, source = dr.RESUMED, resumed
    weights: dict[str, Any] = {"kind": kind_of_weights, "trained_steps": steps}
    if source:
        weights["source"], weights["source_verdict"] = source[0], source[1].as_dict()
    fixes: dict[str, str] = {}
    if norm is not None and type(norm).__name__ == "OnePlusWeightRMSNorm":
        fixes["verifier_norm"] = (
            f"{nc.ONE_PLUS_WEIGHT} in place of upstream's {nc.TIMES_WEIGHT} in this process "
            f"({steps} training steps with it)"
        )
    dropped = sorted(set(sd.m_rope_fields(in_memory)) - set(sd.m_rope_fields(saved)))
    if dropped:
        fixes["served_rope"] = f"saved without {', '.join(dropped)}"
    flag = "sliding_window_non_causal"
    if saved.get(flag) != in_memory.get(flag) and flag in saved:
        fixes["served_attention"] = f"saved with {flag} {sd.json_word(saved[flag])}"
    return {
        "speculators_version": release,
        "speculators_model_type": kind,
        "verifier_types": list(types),
        "verifier_convention": verifier if types else None,
        "verifier_norm": norm_convention(norm),
        "upstream_builds": un.upstream_builds(release, kind, types),
        "weights": weights,
        "fixes": fixes,
    }


def norm_convention(norm: Any) -> str | None:
    """What the drafter's verifier_norm computes; None: it holds none; dr.UNREADABLE: it holds
    one we cannot read (never None, which would read as "no norm")."""
    if norm is None:
        return None
    try:
        found = nc.convention_of(norm)
    except Exception as exc:
        found, reason = None, str(exc)
    else:
        reason = "it computes neither x*w nor x*(1+w) on a probe"
    if found is None:
        log.warning("trained_record: the verifier_norm's convention is unreadable: %s", reason)
        return dr.UNREADABLE
    return found
