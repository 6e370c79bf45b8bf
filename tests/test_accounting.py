"""Accounting on every release: conversations read = conversations kept + skipped by reason,
also when upstream drops rows for --minimum-valid-tokens (counted with their own reason), with
upstream's per-row error lines folded into the summary. An exception that is not a data
problem (here a bug injected into the tokenizer) is not a skip: past a few the run fails and
says where, with the traceback under --debug."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    good_rows,
    last_line,
    prepare_args,
    read_report,
    rejected_rows,
    run_batch,
    write_dataset,
)
from programs.inject_tokenizer_bug import MARK as BUG_MARK

from speculators_qwen_compat.data.account.rows import BELOW_MINIMUM, UPSTREAM_ROW_ERROR

MINIMUM = 12


def _short(answer: str) -> dict:
    return {"messages": [{"role": "user", "content": "Say it."},
                         {"role": "assistant", "content": answer}]}  # fmt: skip


@pytest.fixture(scope="module")
def runs(qwen36_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Both runs in one interpreter (conftest.run_batch), the injected bug's last (it stays
    injected): name -> (rows, data file, output folder, result)."""
    work = tmp_path_factory.mktemp("accounting")
    counted = good_rows(8) + [row for _, row in rejected_rows()] + [_short("Y"), _short("N")]
    bugs = good_rows(4) + [_short(f"{BUG_MARK} {n}") for n in range(4)]
    places = {}
    cases = {}
    for name, rows, extra in (
        ("counted", counted, ("--minimum-valid-tokens", str(MINIMUM))),
        ("bug", bugs, ("--debug",)),
    ):
        data = write_dataset(work / f"{name}.jsonl", rows)
        places[name] = (rows, data, work / f"out-{name}")
        cases[name] = prepare_args(qwen36_dir, places[name][2], data, extra=extra, workers=1)
    results = run_batch(work / "logs", cases, {"bug": "inject_tokenizer_bug"})
    return {name: (*places[name], results[name]) for name in places}


def test_conversations_in_is_kept_plus_skipped(runs: dict[str, Any]) -> None:
    rows, data, output, result = runs["counted"]
    assert result.returncode == 0, result.stderr[-3000:]
    report = read_report(output)
    assert report["conversations_in"] == len(rows)
    assert report["errors"] == 0
    assert report["conversations_kept"] + sum(report["skipped"].values()) == len(rows), report
    assert sorted(report["skipped_examples"][BELOW_MINIMUM]) == [
        f"{data}:{len(rows) - 1}",
        f"{data}:{len(rows)}",
    ], json.dumps(report, indent=1)
    assert report["conversations_kept"] >= 1 and report["rows_out"] >= 1
    assert UPSTREAM_ROW_ERROR not in result.stderr  # folded into the summary line


def test_a_bug_is_not_a_skipped_row(runs: dict[str, Any]) -> None:
    _, data, _, result = runs["bug"]
    assert result.returncode == 1, result.stderr[-3000:]
    assert last_line(result.stderr).startswith(
        "speculators_qwen_compat: error: 4 of 8 conversations failed with an error that is "
        "not a data problem"
    ), result.stderr[-3000:]
    assert f"first at {data}:5: RuntimeError: injected bug" in last_line(result.stderr)
    assert 'raise RuntimeError("injected bug")' in result.stderr  # the traceback, with --debug
