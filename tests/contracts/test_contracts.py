"""Upstream's contracts hold with the fixes on: every wrapped function, on the installed release.

Oracle: upstream itself. tests/programs/contract_probe.py calls each function a fix wraps (see
its docstring) on inputs upstream accepts, once with the fixes off
(``SPECULATORS_QWEN_COMPAT=0``) and once on, in two interpreters of this release. With the fixes
on, a call must return the same types, lengths and keys (and the same value where the value is
plain data), leave its arguments as upstream leaves them, and raise an instance of the exception
type upstream raises. The differences that are the point of a fix are listed in DELIBERATE, each
with its reason (docs/maintainers.md, "Upstream's contracts"). Cost: two probe
interpreters side by side, about 20 s per release on a quiet machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from conftest import RELEASE, program, run_options_env, subprocess_env
from packaging.version import Version

from speculators_qwen_compat.core.startup import ENV_SWITCH

PROBE = program("contract_probe")
OLD = Version("0.6") > RELEASE  # 0.5 drops tool turns, tool calls and reasoning_content
KEEPS_EMPTY_ROWS = Version("0.8") > RELEASE  # <= 0.7 keep rows with an all-zero loss mask

#: case -> why the fixed call differs from upstream on purpose (the difference is the fix).
DELIBERATE: dict[str, str] = {
    "_visualize_sample/empty": (
        "upstream indexes row 0 of an empty dataset (IndexError); the fix says why it is empty"
    ),
}
if not KEEPS_EMPTY_ROWS:  # 0.8+: --render-endpoint URL, upstream's own render path
    DELIBERATE["render_conversation/unreachable"] = (
        "upstream retries 14 s and raises httpx's error for every conversation, which its map "
        "skips; the fix retries within a budget, then raises RenderServerFailed, which ends the "
        "run (a server fault is not data: data/render/render_faults.py)"
    )
    DELIBERATE["_render_conversation_rows/unreachable"] = (
        "upstream logs the error and returns no rows (the conversation is skipped); the fix "
        "raises RenderServerFailed: a server that is gone is not a bad conversation"
    )
    DELIBERATE["load_and_preprocess_dataset/endpoint_unreachable"] = (
        "upstream skips every conversation and fails at the end with 'No samples remain' "
        "(ValueError), or exits 0 with the rows rendered before the server went; the fix fails "
        "the run with RenderServerFailed naming the server (data/render/render_faults.py)"
    )
DELIBERATE["concatenate_datasets/int32_and_int64"] = (
    "upstream refuses datasets whose integer widths differ ('features can't be aligned'), as "
    "a run mixing speculator-format rows with conversations has; the fix casts every part to "
    "the narrowest (data/read/speculator_rows.py)"
)
DELIBERATE["_passthrough_pretokenized/lengths_differ"] = (
    "upstream raises for the whole batch (the run ends); the fix skips and counts that row"
)
if Version("0.7") <= RELEASE < Version("0.8"):
    DELIBERATE["_passthrough_pretokenized/rows"] = (
        "0.7 keeps a speculator-format row with nothing supervised inside the window; the fix "
        "drops and counts it, as 0.8+ drop it"
    )
if KEEPS_EMPTY_ROWS:
    DELIBERATE["load_and_preprocess_dataset/nothing_to_train_on"] = (
        "<= 0.7 keep rows with nothing to supervise (an all-zero loss mask); the fix drops and "
        "counts them, and a run left with none fails with the reasons"
    )
if OLD:
    DELIBERATE["_supports_assistant_mask/qwen36"] = (
        "0.5 probes with an assistant-only conversation, which the Qwen3.6 template rejects "
        "(TemplateError kills the run); the fix answers False and the pattern fallback runs"
    )
    for name in ("tool_calls", "tool_call_without_arguments"):
        DELIBERATE[f"_normalize_conversation/{name}"] = (
            "0.5 drops tool turns and tool calls; the fix keeps them for the template"
        )
    for name in ("thinking", "reasoning_content"):
        DELIBERATE[f"_normalize_conversation/{name}"] = (
            "0.5 drops reasoning_content; the fix passes reasoning under both names, as 0.6+ do"
        )


@pytest.fixture(scope="module")
def probes(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    """Both probe runs, side by side: (fixes off, fixes on)."""
    work = tmp_path_factory.mktemp("contracts")
    runs = {}
    for mode in ("0", "1"):
        out = work / f"probe-{mode}.json"
        # a render server that is not there: the fix's retry budget cut to a second
        env = subprocess_env(**{ENV_SWITCH: mode}, **run_options_env(render_retry_seconds=1))
        command = [sys.executable, "-P", str(PROBE), str(work / mode), str(out)]
        runs[mode] = (out, subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, text=True))  # fmt: skip
    results = []
    for mode, (out, process) in runs.items():
        log, _ = process.communicate(timeout=900)
        assert process.returncode == 0, f"probe (fixes {'on' if mode == '1' else 'off'}):\n{log}"
        results.append(json.loads(out.read_text()))
    off, on = results
    assert (off["fixes_on"], on["fixes_on"]) == (False, True)
    return off["cases"], on["cases"]


def broken(case: str, off: dict[str, Any], on: dict[str, Any] | None) -> str | None:
    """How the fixed call breaks upstream's contract for this case, or None."""
    if on is None:
        return "not run with the fixes on"
    if off["unchanged"] and not on["unchanged"]:
        return "changes its arguments (upstream leaves them as they are)"
    if off["raised"]:
        if not on["raised"]:
            return f"returns where upstream raises {off['raised'][0]}"
        if off["raised"][0] not in on["raised"]:
            return f"raises {on['raised'][0]}, not an instance of upstream's {off['raised'][0]}"
        return None
    if on["raised"]:
        return f"raises {on['raised'][0]} ({on['message'][:120]}) where upstream returns"
    if case == "PREPARE_DATA_OVERWRITE_ALLOWED_FILES":
        missing = set(off["value"]) - set(on["value"])
        return f"drops {sorted(missing)}" if missing or not on["shape"]["all_str"] else None
    if on["shape"] != off["shape"]:
        return f"returns {json.dumps(on['shape'])[:300]}; upstream {json.dumps(off['shape'])[:300]}"
    if off["value"] is not None and on["value"] != off["value"]:
        return f"returns {json.dumps(on['value'])[:300]}; upstream {json.dumps(off['value'])[:300]}"
    return None


def check(family: str, probes: tuple[dict, dict]) -> None:
    off, on = probes
    cases = [case for case in off if case.split("/")[0] == family]
    assert cases, f"the probe ran no {family} case on {RELEASE}"
    problems = []
    for case in cases:
        problem = broken(case, off[case], on.get(case))
        if problem and case not in DELIBERATE:
            problems.append(f"{case}: {problem}")
        if not problem and case in DELIBERATE:
            problems.append(f"{case}: listed as a deliberate difference but upstream agrees")
    assert not problems, "\n".join(problems)


def test_normalize_conversation(probes: tuple[dict, dict]) -> None:
    check("_normalize_conversation", probes)


def test_load_raw_dataset(probes: tuple[dict, dict]) -> None:
    check("load_raw_dataset", probes)


def test_visualize_sample(probes: tuple[dict, dict]) -> None:
    check("_visualize_sample", probes)


@pytest.mark.skipif(Version("0.8") <= RELEASE, reason="0.8+ have no assistant-mask probe")
def test_supports_assistant_mask(probes: tuple[dict, dict]) -> None:
    check("_supports_assistant_mask", probes)


@pytest.mark.skipif(Version("0.8") <= RELEASE, reason="0.8+ batch through the render generation")
def test_preprocess_batch(probes: tuple[dict, dict]) -> None:
    check("_preprocess_batch", probes)


@pytest.mark.skipif(Version("0.8") > RELEASE, reason="only 0.8+ render through vLLM")
def test_render_path(probes: tuple[dict, dict]) -> None:
    check("render_conversation", probes)
    check("_render_conversation_rows", probes)


def test_load_and_preprocess_dataset(probes: tuple[dict, dict]) -> None:
    check("load_and_preprocess_dataset", probes)


@pytest.mark.skipif(Version("0.7") > RELEASE, reason="only 0.7+ pass speculator rows through")
def test_passthrough_pretokenized(probes: tuple[dict, dict]) -> None:
    check("_passthrough_pretokenized", probes)


def test_concatenate_datasets(probes: tuple[dict, dict]) -> None:
    check("concatenate_datasets", probes)


@pytest.mark.skipif(Version("0.8") > RELEASE, reason="only 0.8+ have the --overwrite guard")
def test_overwrite_allowed_files(probes: tuple[dict, dict]) -> None:
    check("PREPARE_DATA_OVERWRITE_ALLOWED_FILES", probes)
