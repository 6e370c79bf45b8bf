"""What each speculators release's drafters build as their frozen ``verifier_norm``, per class.

One table for 0.5.0-0.9.0 (each wheel's ``models/{eagle3,dflash}/core.py``; docs/upstream.md,
"Training"): the trained_record fix names it in the record, doctor judges a folder by its own
release. Checked against each release's own classes in tests/test_norm_verdict.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from speculators_qwen_compat.training import norm_convention as nc

#: speculators types by the class their verifier_norm comes from (PEAGLE subclasses EAGLE-3;
#: DFlash2, DSpark and XPress subclass DFlash). MTP holds no verifier norm.
EAGLE_FAMILY = frozenset({"eagle3", "peagle"})
DFLASH_FAMILY = frozenset({"dflash", "dflash2", "dspark", "xpress"})

#: 0.9.0's ``models/utils.py`` GEMMA_STYLE_FINAL_NORM_MODEL_TYPES: the verifier types (its text
#: config's) 0.9.0's DFlash family gives an ``x*(1+w)`` norm; no qwen3_5_moe, no qwen3_next.
UPSTREAM_0_9_ONE_PLUS_TYPES = frozenset(
    {"gemma", "gemma2", "gemma3", "gemma3_text", "qwen3_5", "qwen3_5_text", "recurrent_gemma"}
)


@dataclass(frozen=True)
class ReleaseNorms:
    """One run of releases: what its EAGLE-3 and DFlash families build (None: no such norm;
    DFlash in 0.9.0: ``x*(1+w)`` for the verifier types in ``dflash_one_plus``, else ``x*w``)."""

    releases: tuple[str, ...]
    eagle: str | None
    dflash: str | None
    dflash_one_plus: frozenset[str] = frozenset()


UPSTREAM_NORMS: tuple[ReleaseNorms, ...] = (
    ReleaseNorms(("0.5.0",), eagle=nc.TIMES_WEIGHT, dflash=None),  # 0.5.0's DFlash: no norm
    ReleaseNorms(
        ("0.6.0", "0.6.0.1", "0.6.0.2", "0.7.0", "0.7.0.1", "0.7.0.2", "0.8.0", "0.8.1"),
        eagle=nc.TIMES_WEIGHT,
        dflash=nc.TIMES_WEIGHT,  # Qwen3RMSNorm
    ),
    ReleaseNorms(
        ("0.9.0",),
        eagle=nc.TIMES_WEIGHT,
        dflash=nc.TIMES_WEIGHT,
        dflash_one_plus=UPSTREAM_0_9_ONE_PLUS_TYPES,  # resolve_verifier_norm_class
    ),
)

#: What ``upstream_builds`` answers for a release outside the table or a type it does not know.
UNKNOWN = "unknown"
#: ... and for a drafter type that holds no verifier norm (MTP, 0.5.0's DFlash).
NO_NORM = "none"


def release_norms(release: str) -> ReleaseNorms | None:
    return next((row for row in UPSTREAM_NORMS if release in row.releases), None)


def upstream_builds(release: str, speculator_type: str, verifier_types: tuple[str, ...]) -> str:
    """The convention (nc.TIMES_WEIGHT / nc.ONE_PLUS_WEIGHT) speculators ``release`` gives a
    ``speculator_type`` drafter's verifier_norm for a verifier of ``verifier_types`` (its
    effective type first, as norm_convention reads them), NO_NORM or UNKNOWN."""
    if speculator_type == "mtp":
        return NO_NORM
    row = release_norms(release)
    if row is None:
        return UNKNOWN
    if speculator_type in EAGLE_FAMILY:
        built = row.eagle
    elif speculator_type in DFLASH_FAMILY:
        if any(t in row.dflash_one_plus for t in verifier_types[:1]):
            return nc.ONE_PLUS_WEIGHT  # 0.9.0 reads the verifier's text config type
        built = row.dflash
    else:
        return UNKNOWN
    return NO_NORM if built is None else built


def tabled_releases() -> tuple[str, ...]:
    return tuple(r for row in UPSTREAM_NORMS for r in row.releases)
