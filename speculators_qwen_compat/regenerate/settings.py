"""What a regenerate-responses run used, and whether ``--resume`` may go on from an earlier run.

Why: upstream resumes over other settings and records neither model nor ``--max-tokens``. The
report holds ``settings``; other generation settings on ``--resume`` are refused unless
``--allow-changed-settings`` (docs/regenerate-responses.md, "What a run used").
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from speculators_qwen_compat.core.errors import CompatError

#: upstream's ``_run`` arguments that decide what is generated, and the flag that sets each
GENERATION = {
    "model": "--model",
    "max_tokens": "--max-tokens",
    "sampling_params": "--sampling-params",
    "reasoning_effort_dist": "--reasoning-effort",
    "temperature_dist": "--temperature",
}
_BLOCK = 1 << 20


def gather(arguments: Mapping[str, Any], endpoint_given: str) -> dict[str, Any]:
    """The settings of this run (``arguments``: upstream's ``_run``, the endpoint as sent)."""
    settings: dict[str, Any] = {"endpoint": arguments["endpoint"]}
    if endpoint_given != arguments["endpoint"]:
        settings["endpoint_given"] = endpoint_given
    for name in GENERATION:
        if name in arguments:
            settings[name] = _plain(arguments[name])
    dataset = str(arguments["dataset_name"])
    settings["dataset"] = dataset
    settings["dataset_fingerprint"] = fingerprint(Path(dataset))
    settings["releases"] = {name: _version(name) for name in
                            ("speculators", "speculators_qwen_compat")}  # fmt: skip
    return settings


def fingerprint(path: Path) -> str | None:
    """``sha256:HEX`` of a local data file's bytes (None for a preset or a file not read)."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as file:
            while block := file.read(_BLOCK):
                digest.update(block)
    except OSError:
        return None
    return f"sha256:{digest.hexdigest()}"


def earlier_report(report: Path) -> dict[str, Any] | None:
    """The last report of this output: ``OUTFILE.report.json``, else the highest
    ``OUTFILE.report.N.json`` (an earlier run set aside); None when there is none to read."""
    candidates = [report]
    head, tail = report.name[: -len(".json")] + ".", ".json"
    numbered = []
    with contextlib.suppress(OSError):
        for path in report.parent.iterdir():
            number = path.name[len(head) : len(path.name) - len(tail)]
            if path.name.startswith(head) and path.name.endswith(tail) and number.isdigit():
                numbered.append((int(number), path))
    candidates += [path for _, path in sorted(numbered, reverse=True)]
    for path in candidates:
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(value, dict):
            return value
    return None


def changed(earlier: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """The generation settings (``_run``'s names) that differ between two runs' ``settings``."""
    return [
        name
        for name in GENERATION
        if name in earlier and name in now and _key(earlier[name]) != _key(now[name])
    ]


def refusal(names: list[str], earlier: Mapping[str, Any], now: Mapping[str, Any],
            output: Path) -> CompatError:  # fmt: skip
    """The one line refusing a ``--resume`` whose generation settings differ."""
    each = "; ".join(
        f"{GENERATION[name]} {_shown(earlier[name])} then, {_shown(now[name])} now"
        for name in names
    )
    return CompatError(
        f"--resume with settings that differ from the earlier run's on {output}: {each}; the "
        "rows would mix both: rerun with the earlier settings, give another --outfile, or pass "
        "--allow-changed-settings to go on (the report keeps both); nothing was done"
    )


def carried(earlier: Mapping[str, Any], now: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``earlier_settings`` of this run's report: the earlier report's, and the earlier run's
    settings when its generation settings differ from these."""
    kept = [dict(s) for s in earlier.get("earlier_settings") or [] if isinstance(s, Mapping)]
    before = earlier.get("settings")
    if isinstance(before, Mapping) and changed(before, now):
        kept.append(dict(before))
    return kept


def _plain(value: Any) -> Any:
    """A setting as JSON holds it (a dict stays a dict, anything else odd becomes its text)."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return str(value)


def _key(value: Any) -> str:
    """What two settings are compared by: numerically equal values are one setting (``1`` and
    ``1.0``; a ``--temperature`` distribution's keys ``"1"`` and ``"1.0"``), the order of a
    dict's keys does not count."""
    return json.dumps(_numbers_as_floats(value), sort_keys=True)


def _numbers_as_floats(value: Any) -> Any:
    """``value`` with each number (not a bool) a float, and each dict key that reads as a
    number (0.9.0's ``--temperature`` keys) that number's text as a float."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, Mapping):
        return {_number_key(key): _numbers_as_floats(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_numbers_as_floats(item) for item in value]
    return value


def _number_key(key: Any) -> str:
    try:
        return repr(float(key)) if not isinstance(key, bool) else str(key)
    except (TypeError, ValueError):
        return str(key)


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
