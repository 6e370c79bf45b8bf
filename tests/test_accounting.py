"""Accounting on every release: conversations read = conversations kept + skipped by reason,
also when upstream drops rows for --minimum-valid-tokens (counted with their own reason), with
upstream's per-row error lines folded into the summary. An exception that is not a data
problem (here a bug injected into the tokenizer) is not a skip: past a few the run fails and
says where, with the traceback under --debug."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import (
    good_rows,
    last_line,
    prepare,
    read_report,
    rejected_rows,
    run_program,
    write_dataset,
)
from programs.inject_tokenizer_bug import MARK as BUG_MARK

from speculators_qwen_compat.fixes.data.row_guard import BELOW_MINIMUM, UPSTREAM_ROW_ERROR

MINIMUM = 12


def _short(answer: str) -> dict:
    return {"messages": [{"role": "user", "content": "Say it."},
                         {"role": "assistant", "content": answer}]}  # fmt: skip


def test_conversations_in_is_kept_plus_skipped(qwen36_dir: Path, tmp_path: Path) -> None:
    good = good_rows(8)
    rows = good + [row for _, row in rejected_rows()] + [_short("Y"), _short("N")]
    data = write_dataset(tmp_path / "d.jsonl", rows)
    output = tmp_path / "out"
    result = prepare(
        qwen36_dir, output, data, extra=("--minimum-valid-tokens", str(MINIMUM)), workers=1
    )
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


def test_a_bug_is_not_a_skipped_row(qwen36_dir: Path, tmp_path: Path) -> None:
    good = good_rows(4)
    bugs = [_short(f"{BUG_MARK} {n}") for n in range(4)]
    data = write_dataset(tmp_path / "d.jsonl", good + bugs)
    result = run_program(
        "inject_tokenizer_bug", "--model", str(qwen36_dir), "--data", str(data),
        "--output", str(tmp_path / "out"), "--seq-length", "512",
        "--num-preprocessing-workers", "1", "--debug",
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-3000:]
    assert last_line(result.stderr).startswith(
        "speculators_qwen_compat: error: 4 of 8 conversations failed with an error that is "
        "not a data problem"
    ), result.stderr[-3000:]
    assert f"first at {data}:5: RuntimeError: injected bug" in last_line(result.stderr)
    assert 'raise RuntimeError("injected bug")' in result.stderr  # the traceback, with --debug
