"""Did a saved drafter learn the verifier's own targets? ``right``, ``mis-scaled``, ``unknown``.

Why: most users trained before they found the fixes. Our ``train``'s folders say so in their
record (drafter_record.py); any other is judged by its recorded release, class and verifier family
through the one per-release table (upstream_norms.py): an 0.8.1 drafter gets 0.8.1's answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from speculators_qwen_compat.training import drafter_record as dr
from speculators_qwen_compat.training import norm_convention as nc
from speculators_qwen_compat.training import upstream_norms as un

RIGHT = "right"
MIS_SCALED = "mis-scaled"
UNKNOWN = "unknown"
#: ``weights`` kinds whose weights came from elsewhere: their source's verdict counts.
LOADED_KINDS = (dr.LOADED, dr.RESUMED)


@dataclass(frozen=True)
class NormVerdict:
    word: str  # RIGHT, MIS_SCALED or UNKNOWN
    why: str

    def as_dict(self) -> dict[str, str]:
        return {"word": self.word, "why": self.why}


def recorded_verifier(config: dict[str, Any]) -> dict[str, Any]:
    """``speculators_config.verifier`` of a drafter's config.json ({} when absent or not an
    object: a hand-edited config)."""
    speculators_config = config.get("speculators_config")
    verifier = speculators_config.get("verifier") if isinstance(speculators_config, dict) else None
    return verifier if isinstance(verifier, dict) else {}


def verifier_types(config: dict[str, Any], fallback: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The verifier's model types from the architectures the drafter's config records, else
    ``fallback`` (the served verifier's own config)."""
    architectures = recorded_verifier(config).get("architectures")
    found = nc.architecture_types(architectures if isinstance(architectures, list) else None)
    return found or fallback


def judge(config: dict[str, Any], record: dict[str, Any] | None,
          fallback_types: tuple[str, ...] = ()) -> NormVerdict:  # fmt: skip
    """The verdict on the folder whose config.json is ``config`` and record ``record``."""
    if record is not None and isinstance(record.get("weights"), dict):
        return _from_record(record)
    return from_release(config, fallback_types)


def _from_record(record: dict[str, Any]) -> NormVerdict:
    weights = record["weights"]
    norm, verifier = record.get("verifier_norm"), record.get("verifier_convention")
    release = record.get("speculators_version", "?")
    kind = record.get("speculators_model_type")
    steps = weights.get("trained_steps") or 0
    source = weights.get("source_verdict") if weights.get("kind") in LOADED_KINDS else None
    if steps == 0 and isinstance(source, dict):  # loaded and saved again: not trained here
        return NormVerdict(
            str(source.get("word", UNKNOWN)),
            f"re-saved by speculators {release} without training (record); the weights are "
            f"those of {weights.get('source', 'the folder it loaded')}: {source.get('why', '')}",
        )
    if norm == dr.UNREADABLE:
        return NormVerdict(
            UNKNOWN,
            f"the record says its verifier_norm's convention could not be read when it was "
            f"saved (speculators {release})",
        )
    if norm is None:
        types = tuple(str(t) for t in record.get("verifier_types") or ())
        built = un.upstream_builds(str(release), str(kind), types)
        if built == un.NO_NORM:
            return NormVerdict(RIGHT, f"speculators {release} {kind} holds no verifier_norm "
                                      "(record)")  # fmt: skip
        return NormVerdict(
            UNKNOWN,
            f"the record holds no verifier_norm, but speculators {release} {kind} builds one "
            f"({built}, upstream_norms.py): what it trained with is not recorded",
        )
    if verifier is None:
        return NormVerdict(UNKNOWN, "the record names no verifier family: --model's would tell")
    if norm != verifier:
        return NormVerdict(
            MIS_SCALED,
            f"the record says its verifier_norm computed {norm} where the verifier computes "
            f"{verifier} while it trained (speculators {release}, fix verifier_norm off?)",
        )
    if steps == 0:
        return NormVerdict(
            RIGHT,
            f"saved before any training (speculators {release}, record), verifier_norm "
            f"computing {norm} as the verifier does; train from it with the fixes on",
        )
    how = (
        f"trained {steps} steps by speculators {release}, verifier_norm computing {norm} as "
        "the verifier does (record)"
    )
    if weights.get("kind") in LOADED_KINDS and not isinstance(source, dict):
        return NormVerdict(UNKNOWN, f"{how}; from weights whose verdict the record lacks")
    if isinstance(source, dict) and source.get("word") == MIS_SCALED:
        return NormVerdict(
            UNKNOWN,
            f"fine-tuned {steps} steps from a drafter that learned mis-scaled targets: its norm "
            f"is right now; whether {steps} steps undid what it learned is not measured "
            f"(retraining is the known answer); {how}, from {weights.get('source')}",
        )
    if isinstance(source, dict) and source.get("word") != RIGHT:
        return NormVerdict(
            UNKNOWN,
            f"{how}; from {weights.get('source')}, whose verdict is {source.get('word')} "
            f"({source.get('why', '')}): what it learned before is not known",
        )
    if isinstance(source, dict):
        how += f"; fine-tuned from {weights.get('source')}, which was right"
    return NormVerdict(RIGHT, how)


def from_release(config: dict[str, Any], fallback_types: tuple[str, ...] = ()) -> NormVerdict:
    """The verdict from what plain speculators records: release, type, verifier family."""
    release = str(config.get("speculators_version") or "")
    kind = str(config.get("speculators_model_type") or "")
    types = verifier_types(config, fallback_types)
    if not types:
        return NormVerdict(
            UNKNOWN,
            "the verifier's family is not recorded (speculators_config.verifier.architectures) "
            "and --model's config is unreadable: a verifier config would tell",
        )
    verifier = nc.ONE_PLUS_WEIGHT if nc.uses_one_plus_weight(types) else nc.TIMES_WEIGHT
    if not release:
        return NormVerdict(
            UNKNOWN,
            "config.json records no speculators_version: the release that trained it would "
            f"tell (speculators {', '.join(un.tabled_releases())} are known)",
        )
    built = un.upstream_builds(release, kind, types)
    family = f"{types[0]} verifier"
    if built == un.NO_NORM:
        return NormVerdict(RIGHT, f"speculators {release} {kind} holds no verifier_norm")
    if built == un.UNKNOWN:
        return NormVerdict(
            UNKNOWN,
            f"speculators {release} {kind} is not in the release table (known: "
            f"{', '.join(un.tabled_releases())}); `speculators-qwen-compat doctor --model M` "
            f"in a venv with speculators {release} says which drafter types that release builds "
            "right",
        )
    said = f"speculators {release} {kind} builds verifier_norm as {built}"
    if built == verifier:
        note = (
            " (when the verifier's config was readable as it trained)"
            if kind in un.DFLASH_FAMILY and built == nc.ONE_PLUS_WEIGHT
            else ""
        )
        return NormVerdict(RIGHT, f"{said}, as the {family} does{note}")
    return NormVerdict(
        MIS_SCALED,
        f"{said}; the {family} normalises {verifier}: it learned from mis-scaled targets",
    )
