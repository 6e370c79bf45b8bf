"""Fix: the frozen ``verifier_norm`` of a drafter computes what the verifier's own final norm does.

Why: drafters build it as ``x*w``; a Qwen3.5/3.6 verifier uses ``x*(1+w)``, so drafters learn from
mis-scaled targets, silently (docs/upstream.md, "Training"). Target: ``SpeculatorModel.post_init``:
such a norm becomes a frozen ``(1+w)`` RMS norm under the same name; anything else stays.
"""

from __future__ import annotations

import logging
from typing import Any

from speculators_qwen_compat.core.fix import Fix, Patcher
from speculators_qwen_compat.core.targets import ReleaseRange, Resolved, Shape, Target
from speculators_qwen_compat.core.upstream import SPECULATOR_MODEL
from speculators_qwen_compat.training import norm_convention as nc
from speculators_qwen_compat.training import upstream_norms as un

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

    def apply(self, found: Resolved, patcher: Patcher) -> None:
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
    _check_table(model, types, convention)
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


def _check_table(model: Any, types: tuple[str, ...], convention: str | None) -> None:
    """Warns when the norm upstream built is not the one the release table says (doctor judges
    saved drafters by that table): the table is out of date for this release."""
    from importlib.metadata import version

    release = version("speculators")
    speculator_type = str(getattr(getattr(model, "config", None), "speculators_model_type", ""))
    said = un.upstream_builds(release, speculator_type, types)
    if said not in (un.UNKNOWN, un.NO_NORM) and convention is not None and said != convention:
        log.warning(
            "speculators %s %s builds verifier_norm as %s, the release table says %s "
            "(speculators_qwen_compat training/upstream_norms.py is out of date)",
            release, speculator_type, convention, said,
        )  # fmt: skip
