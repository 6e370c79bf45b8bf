"""The route a prepare_data row takes, traced in a real run (programs/route_trace.py: upstream as
installed, our entry point, one map worker and two), is the route declared for the release
(route/render.py or route/script.py, as ``status --route`` prints it): every call of a declared
function is nested where the declaration nests it, the calls under each caller come in the
declared order, every call this run must make is made, and the batches run in the map workers."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    RELEASE,
    RENDERS,
    good_rows,
    prepare_args,
    rejected_rows,
    run_program,
    write_dataset,
)
from packaging.version import Version

#: 0.7+ pass speculator-format rows through (``_passthrough_pretokenized``).
PASSES_THROUGH = Version("0.7") <= RELEASE
WORKERS = (1, 2)
BATCH = "_preprocess_batch"

Stack = tuple[str, ...]


def _declared() -> tuple[dict[Stack, list[str]], dict[Stack, str]]:
    """The installed release's route: each call's stack (its callers' paths, then its own) ->
    the paths it calls, in order; and each stack -> its ``when`` (empty: every run makes it)."""
    import importlib

    from speculators_qwen_compat.core.upstream import CLI_PREPARE_DATA, PREPROCESSING
    from speculators_qwen_compat.route.declaration import generation, shown

    for module in (PREPROCESSING, CLI_PREPARE_DATA, "datasets"):
        if module != CLI_PREPARE_DATA or RENDERS:
            importlib.import_module(module)
    calls: dict[Stack, list[str]] = {}
    when: dict[Stack, str] = {}
    path: list[str] = []
    for depth, call in shown(generation().ROUTE):
        del path[depth:]
        if path:
            calls[tuple(path)].append(call.path)
        path.append(call.path)
        calls[tuple(path)] = []
        # a call some runs skip, or one under such a call
        when[tuple(path)] = call.when or (when[tuple(path[:-1])] if depth else "")
    return calls, when


def _speculator_rows(path: Path) -> Path:
    rows = [{"input_ids": [3, 4, 5, 6, 7, 8], "loss_mask": [0, 0, 1, 1, 1, 1]}] * 3
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def traces(qwen36_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[int, Any]:
    """Per worker count: each process's records (``stack``, ``ids``) in the order written, and
    the pid of the run's own process."""
    work = tmp_path_factory.mktemp("route-trace")
    data = [write_dataset(work / "chats.jsonl", [*good_rows(6), rejected_rows()[0][1]])]
    if PASSES_THROUGH:
        data.append(_speculator_rows(work / "speculator.jsonl"))
    out: dict[int, Any] = {}
    for workers in WORKERS:
        folder = work / f"trace-{workers}"
        args = prepare_args(qwen36_dir, work / f"out-{workers}", *data, workers=workers)
        ran = run_program("route_trace", str(folder), *args)
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert json.loads(ran.stdout.strip().splitlines()[-1]) == {"code": 0}, ran.stderr[-3000:]
        records = {
            int(file.stem): [
                record
                for line in file.read_text(encoding="utf-8").splitlines()
                if "stack" in (record := json.loads(line))
            ]
            for file in folder.glob("*.jsonl")
        }
        (run_pid,) = [pid for pid, rs in records.items() if any(len(r["stack"]) == 1 for r in rs)]
        out[workers] = (records, run_pid)
    return out


@pytest.mark.parametrize("workers", WORKERS)
def test_each_traced_call_is_nested_as_declared(traces: dict[int, Any], workers: int) -> None:
    declared, _ = _declared()
    records, _ = traces[workers]
    traced = {tuple(r["stack"]) for rs in records.values() for r in rs}
    assert traced, "nothing traced: the program watched the wrong functions"
    undeclared = sorted(traced - declared.keys())
    assert not undeclared, f"called where the route does not declare it: {undeclared}"


@pytest.mark.parametrize("workers", WORKERS)
def test_every_call_this_run_must_make_is_made(traces: dict[int, Any], workers: int) -> None:
    declared, when = _declared()
    records, _ = traces[workers]
    traced = {tuple(r["stack"]) for rs in records.values() for r in rs}
    # this run's data: pattern masks (the template has no generation tags), speculator rows
    made_here = {"no HF assistant mask", "0.7: speculator-format rows", "speculator-format rows"}
    required = {stack for stack in declared if not when[stack] or when[stack] in made_here}
    if not PASSES_THROUGH:
        required = {s for s in required if "_passthrough_pretokenized" not in s}
    assert not sorted(required - traced), f"declared but never called: {required - traced}"


@pytest.mark.parametrize("workers", WORKERS)
def test_each_caller_makes_its_calls_in_the_declared_order(
    traces: dict[int, Any], workers: int
) -> None:
    """Under each call (one caller's frame, in one process), the first call of each path comes
    in the declared order: a row meets them in that order, whatever repeats per row."""
    declared, _ = _declared()
    records, _ = traces[workers]
    firsts: dict[tuple[int, int], list[str]] = defaultdict(list)
    parents: dict[tuple[int, int], Stack] = {}
    for pid, rs in records.items():
        for record in rs:
            if len(record["stack"]) < 2:
                continue
            caller = (pid, record["ids"][-2])
            parents[caller] = tuple(record["stack"][:-1])
            if record["stack"][-1] not in firsts[caller]:
                firsts[caller].append(record["stack"][-1])
    assert firsts
    for caller, seen in firsts.items():
        order = declared[parents[caller]]
        assert seen == sorted(seen, key=order.index), f"under {parents[caller]}: {seen}"


def test_batches_run_in_the_map_workers(traces: dict[int, Any]) -> None:
    """Each map's batches in as many processes as workers asked for (with two, never the run's
    own: forked workers, the route as declared in each); datasets 5 forks a pool of one too."""
    for workers in WORKERS:
        records, run_pid = traces[workers]
        per_map: dict[int, set[int]] = defaultdict(set)
        for pid, rs in records.items():
            for record in rs:
                if record["stack"][-1] == BATCH:
                    per_map[record["ids"][-2]].add(pid)
        assert per_map, "no batch traced"
        assert all(1 <= len(pids) <= workers for pids in per_map.values()), per_map
        if workers == 2:
            assert max(len(pids) for pids in per_map.values()) == 2, per_map
            assert not any(run_pid in pids for pids in per_map.values()), (run_pid, per_map)


def test_status_route_prints_the_declaration_traced_here() -> None:
    """``status --route`` prints the route these tests hold the traced run against: each call
    at its depth, in order, with the stages of the fixes applied here under it."""
    import subprocess
    import sys

    from conftest import subprocess_env

    from speculators_qwen_compat.route.declaration import generation, shown

    _declared()  # imports upstream as the declaration needs
    ran = subprocess.run(
        [sys.executable, "-m", "speculators_qwen_compat", "status", "--route"],
        capture_output=True, text=True, env=subprocess_env(), timeout=600,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    printed: list[tuple[int, str]] = []
    for line in ran.stdout.splitlines()[2:]:  # after the release and the generation
        indent = len(line) - len(line.lstrip())
        if printed and indent == 2 * printed[-1][0] + 2 + 4:
            continue  # a stage under the call above
        printed.append(((indent - 2) // 2, line.split()[0]))
    assert printed == [(depth, call.path) for depth, call in shown(generation().ROUTE)]
