"""Fatal problems end with one line ``speculators_qwen_compat: error: ...`` and exit 1; bad rows
are skipped and counted instead."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import good_rows, last_line, prepare, read_report, rejected_rows, write_dataset

PREFIX = "speculators_qwen_compat: error: "


def _prepare(model: Path | str, data: Path | str, output: Path, *extra: str):
    return prepare(model, output, data, extra=extra, workers=1)


def _fatal(result) -> str:
    assert result.returncode == 1, result.stderr[-3000:]
    line = last_line(result.stderr)
    assert line.startswith(PREFIX), result.stderr[-3000:]
    return line[len(PREFIX) :]


def test_missing_model_is_one_line_and_debug_shows_the_traceback(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "d.jsonl", good_rows(2))
    result = _prepare(tmp_path / "no-such-model", data, tmp_path / "out")
    message = _fatal(result)
    assert "no-such-model" in message and "--debug" in message
    assert "Traceback" not in result.stderr
    debug = _prepare(tmp_path / "no-such-model", data, tmp_path / "out", "--debug")
    assert "Traceback" in debug.stderr
    assert last_line(debug.stderr).startswith(PREFIX)


def test_missing_data_file(qwen36_dir: Path, tmp_path: Path) -> None:
    message = _fatal(_prepare(qwen36_dir, tmp_path / "nope.jsonl", tmp_path / "out"))
    assert message == f"--data {tmp_path / 'nope.jsonl'}: no such file"


def test_no_conversation_column_names_the_columns(qwen36_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "hi", "completion": "yo"}\n')
    message = _fatal(_prepare(qwen36_dir, data, tmp_path / "out"))
    assert "no conversation column (columns found: completion, prompt)" in message
    assert "pass --prompt-column prompt --response-column completion" in message
    other = tmp_path / "e.jsonl"
    other.write_text('{"id": 1, "text": "hi"}\n')
    message = _fatal(_prepare(qwen36_dir, other, tmp_path / "out"))
    assert "no conversation column (columns found: id, text)" in message
    assert "--conversations-key" in message


def test_every_row_rejected_is_an_error_with_the_reasons(qwen36_dir: Path, tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "d.jsonl", [row for _, row in rejected_rows()])
    message = _fatal(_prepare(qwen36_dir, data, tmp_path / "out"))
    assert message.startswith("no conversation survived preprocessing (skipped 4 of 4")
    assert '2 x "No user query found in messages."' in message


def test_malformed_lines_are_counted_and_good_rows_kept(qwen36_dir: Path, tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "d.jsonl", good_rows(6))
    with data.open("a", encoding="utf-8") as fh:
        fh.write('{"messages": [\n[1, 2]\n')
    output = tmp_path / "out"
    result = _prepare(qwen36_dir, data, output)
    assert result.returncode == 0, result.stderr[-3000:]
    report = read_report(output)
    assert report["conversations_in"] == 8
    assert report["skipped"] == {"malformed JSON line": 1, "row is not a JSON object": 1}
    assert report["skipped_examples"]["malformed JSON line"] == [f"{data}:7"]


def test_a_file_of_garbage_and_an_empty_file(qwen36_dir: Path, tmp_path: Path) -> None:
    garbage = tmp_path / "g.jsonl"
    garbage.write_text("not json\nstill not\n")
    assert _fatal(_prepare(qwen36_dir, garbage, tmp_path / "o1")).startswith(f"{garbage}:1: ")
    empty = tmp_path / "e.jsonl"
    empty.write_text("")
    assert "holds no rows" in _fatal(_prepare(qwen36_dir, empty, tmp_path / "o2"))


def test_overwrite_refuses_to_delete_other_files(qwen36_dir: Path, tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "d.jsonl", good_rows(3))
    output = tmp_path / "out"
    assert _prepare(qwen36_dir, data, output).returncode == 0
    (output / "notes.txt").write_text("mine")
    message = _fatal(_prepare(qwen36_dir, data, output, "--overwrite"))
    assert "notes.txt" in message
    assert (output / "notes.txt").read_text() == "mine"
    (output / "notes.txt").unlink()
    rerun = _prepare(qwen36_dir, data, output, "--overwrite")
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert json.loads((output / "compat_report.json").read_text())["rows_out"] > 0
