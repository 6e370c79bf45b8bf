"""Hostile data: every bad row skipped and counted by reason, every good row kept with the right
mask, on files in both formats, with BOMs, folders, JSON arrays and several --data files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from conftest import RELEASE, RENDERS, prepare, read_report
from hostile_corpus import as_sharegpt, corpus, jsonl
from mask_oracle import check_masks, load_rows
from packaging.version import Version

WITH_TOOLS = Version("0.7") <= RELEASE
SEQ = 512
FILE_LEVEL = {
    "malformed JSON line": '{"messages": [{"role": "user", "content": "cut off',
    "row is not a JSON object": "[1, 2, 3]",
    "no conversation column (conversations, messages, conversation)": (
        '{"prompt": "hi", "completion": "yo"}'
    ),
}


def _prepare(model: Path, output: Path, *data: Path):
    return prepare(model, output, *data, seq_length=SEQ)


@pytest.mark.parametrize("sharegpt", [False, True], ids=["openai", "sharegpt"])
def test_corpus(qwen36_dir: Path, tmp_path: Path, sharegpt: bool) -> None:
    cases = corpus(RENDERS)
    assert len(cases) >= 30
    rows = [as_sharegpt(row) if sharegpt else row for row, _ in cases.values()]
    data = tmp_path / "corpus.jsonl"
    text = jsonl(rows)
    data.write_text(text + "".join(line + "\n" for line in FILE_LEVEL.values()), "utf-8")
    output = tmp_path / "out"

    result = _prepare(qwen36_dir, output, data)
    assert result.returncode == 0, result.stderr[-3000:]

    report = read_report(output)
    want = Counter(reason for _, reason in cases.values() if reason) + Counter(FILE_LEVEL.keys())
    assert report["skipped"] == dict(want)
    assert report["conversations_in"] == len(rows) + len(FILE_LEVEL)
    good = [as_sharegpt(row) if sharegpt else row for row, reason in cases.values() if not reason]
    expected = check_masks(qwen36_dir, load_rows(output), good, RENDERS, with_tools=WITH_TOOLS)
    assert report["rows_out"] == expected
    first_line = len(rows) + 1
    assert report["skipped_examples"]["malformed JSON line"] == [f"{data}:{first_line}"]
    late = list(cases).index("late_system") + 1
    assert (
        f"{data}:{late}" in report["skipped_examples"]["System message must be at the beginning."]
    )


def test_folders_json_arrays_bom_and_several_files(qwen36_dir: Path, tmp_path: Path) -> None:
    good = [row for row, reason in corpus(RENDERS).values() if reason is None]
    folder = tmp_path / "folder"
    (folder / "nested").mkdir(parents=True)
    (folder / "a.jsonl").write_bytes(b"\xef\xbb\xbf" + jsonl(good[:6]).encode())  # UTF-8 BOM
    sharegpt_array = json.dumps([as_sharegpt(r) for r in good[6:12]], ensure_ascii=False)
    (folder / "nested" / "b.json").write_text(sharegpt_array, "utf-8")
    (folder / "notes.txt").write_text("not data")
    extra = tmp_path / "c.jsonl"
    extra.write_text(jsonl([as_sharegpt(r) for r in good[12:]]), "utf-8")
    output = tmp_path / "out"

    result = _prepare(qwen36_dir, output, folder, extra)
    assert result.returncode == 0, result.stderr[-3000:]
    report = read_report(output)
    assert report["conversations_in"] == len(good)
    assert report["skipped"] == {}
    check_masks(qwen36_dir, load_rows(output), good, RENDERS, with_tools=WITH_TOOLS)
