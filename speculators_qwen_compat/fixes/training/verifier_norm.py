"""Fix: the frozen ``verifier_norm`` of a drafter computes what the verifier's own final norm does.

Target: ``speculators.model.SpeculatorModel.post_init``, the last call of every drafter's
``__init__`` after it has built ``verifier_norm`` (EAGLE-3 ``models/eagle3/core.py`` and DFlash
``models/dflash/core.py`` in 0.5.0-0.9.0; PEAGLE, DSpark, DFlash2 and XPress inherit them), for
fresh training (``from_training_args``) and ``--from-pretrained`` alike: verifier weights are
loaded into ``verifier_norm.weight`` only afterwards (``load_verifier_weights``).

Why: the target logits are ``verifier_lm_head(verifier_norm(last pre-norm hidden state))``.
EAGLE-3 builds ``verifier_norm`` with the draft's Llama norm (``x*w``) in every release; DFlash
with ``Qwen3RMSNorm`` (``x*w``) in 0.6.0.2-0.8.1, and 0.9.0 picks ``x*(1+w)`` only for types in
``models/utils.py`` ``GEMMA_STYLE_FINAL_NORM_MODEL_TYPES``, which lacks ``qwen3_5_moe``. A
Qwen3.5/3.6 verifier normalises with ``x*(1+w)`` (weights near zero): without the fix every
drafter trained for it learns from mis-scaled targets, silently (docs/upstream.md "Training").

What it does: when the verifier's effective model type (training/norm_convention.py) is in the
``(1+w)`` family and the drafter's ``verifier_norm`` computes ``x*w`` (checked by running it), the
module is replaced by a frozen ``(1+w)`` RMS norm of the same size, eps, dtype and device under
the same attribute, so the state-dict key stays ``verifier_norm.weight``. A verifier_norm that
already computes ``(1+w)`` (0.9.0 DFlash for dense Qwen3.5) is left alone and logged as not
needed; an ``x*w`` verifier (Llama, Qwen3) is never touched.
"""

from __future__ import annotations

import logging
from typing import Any

from speculators_qwen_compat.core.fix import Fix, Patcher
from speculators_qwen_compat.core.targets import Found, ReleaseRange, Shape, Target
from speculators_qwen_compat.core.upstream import SPECULATOR_MODEL
from speculators_qwen_compat.training import norm_convention as nc

log = logging.getLogger("speculators_qwen_compat")

ATTRIBUTE = "verifier_norm"
REPLACED = "replaced"
ALREADY_RIGHT = "not-needed"
LEFT_ALONE = "left-alone"


POST_INIT = Target(SPECULATOR_MODEL, "SpeculatorModel.post_init")


class VerifierNormFix(Fix):
    name = "verifier_norm"
    summary = "a drafter's frozen verifier_norm computes x*(1+w) for Qwen3.5/3.6-family verifiers"
    modules = (SPECULATOR_MODEL,)
    shapes = (
        Shape(
            "drafters holding a frozen verifier_norm (EAGLE-3, DFlash and their subclasses) get "
            "an x*(1+w) norm when the verifier normalises that way (Qwen3.5/3.6, Qwen3-Next, "
            "Gemma)",
            (POST_INIT,),
        ),
    )
    applies_on = ReleaseRange("0.5.0", "0.9.0")

    def apply(self, found: Found, patcher: Patcher) -> None:
        def post_init(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            result = wrapped(*args, **kwargs)
            if getattr(instance, ATTRIBUTE, None) is not None:
                try:
                    fix_verifier_norm(instance)
                except Exception as exc:  # never break building a drafter
                    kind = type(instance).__name__
                    log.warning("verifier_norm fix skipped for %s: %s", kind, exc)
            return result

        patcher.wrap(*found.owner_and_name(POST_INIT), post_init)


def verifier_of(model: Any) -> tuple[str | None, list[str] | None]:
    """(name_or_path, architectures) of the verifier a drafter's config names."""
    speculators_config = getattr(getattr(model, "config", None), "speculators_config", None)
    verifier = getattr(speculators_config, "verifier", None)
    return getattr(verifier, "name_or_path", None), getattr(verifier, "architectures", None)


def verifier_types(model: Any) -> tuple[str, ...]:
    """The verifier's model types from its config, else from the architectures recorded."""
    name_or_path, architectures = verifier_of(model)
    types = nc.verifier_model_types(name_or_path) if name_or_path else None
    return types if types is not None else nc.architecture_types(architectures)


def fix_verifier_norm(model: Any) -> str:
    """Make ``model.verifier_norm`` compute what the verifier's final norm does.

    Returns REPLACED, ALREADY_RIGHT or LEFT_ALONE (no verifier_norm, an x*w verifier, or a
    norm of a shape we do not know)."""
    norm = getattr(model, ATTRIBUTE, None)
    if norm is None:
        return LEFT_ALONE
    types = verifier_types(model)
    if not nc.uses_one_plus_weight(types):
        return LEFT_ALONE
    kind = type(model).__name__
    convention = nc.convention_of(norm)
    if convention == nc.ONE_PLUS_WEIGHT:
        log.info("verifier_norm fix not needed for %s: it already computes x*(1+w)", kind)
        return ALREADY_RIGHT
    eps = nc.norm_eps(norm)
    if convention != nc.TIMES_WEIGHT or eps is None:
        log.warning(
            "verifier_norm of %s is a %s we do not know; left alone", kind, type(norm).__name__
        )
        return LEFT_ALONE
    weight = norm.weight
    replacement = nc.one_plus_weight_rms_norm(
        weight.shape[0], eps=eps, dtype=weight.dtype, device=weight.device
    )
    replacement.weight.requires_grad_(False)
    setattr(model, ATTRIBUTE, replacement)
    log.warning(
        "%s: the verifier (%s) normalises with x*(1+w); verifier_norm %s (x*w) replaced by an "
        "x*(1+w) RMS norm (speculators_qwen_compat fix verifier_norm)",
        kind,
        types[0],
        type(norm).__name__,
    )
    return REPLACED
