"""Hostile data: every bad row skipped and counted by reason, every good row kept with the right
mask, on files in both formats, with BOMs, folders, JSON arrays and several --data files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import RELEASE, RENDERS, prepare_args, read_report, run_batch
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


@pytest.fixture(scope="module")
def runs(qwen36_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The three runs of the tests below in one interpreter (conftest.run_batch): name ->
    (data path, output folder, result)."""
    work = tmp_path_factory.mktemp("hostile")
    places: dict[str, tuple[Any, Path]] = {}
    for form in ("openai", "sharegpt"):
        folder = work / form
        folder.mkdir()
        rows = [
            as_sharegpt(row) if form == "sharegpt" else row for row, _ in corpus(RENDERS).values()
        ]
        data = folder / "corpus.jsonl"
        (folder / "cat.png").write_bytes(b"")  # image_by_path's file, beside the data file
        data.write_text(jsonl(rows) + "".join(line + "\n" for line in FILE_LEVEL.values()), "utf-8")
        places[form] = (data, folder / "out")
    places["folders"] = (_folders_and_files(work / "folders"), work / "folders" / "out")
    cases = {
        name: prepare_args(qwen36_dir, output, *(data if isinstance(data, list) else [data]),
                           seq_length=SEQ)
        for name, (data, output) in places.items()
    }  # fmt: skip
    results = run_batch(work / "logs", cases)
    return {name: (*places[name], results[name]) for name in places}


@pytest.mark.parametrize("sharegpt", [False, True], ids=["openai", "sharegpt"])
def test_corpus(qwen36_dir: Path, runs: dict[str, Any], sharegpt: bool) -> None:
    cases = corpus(RENDERS)
    assert len(cases) >= 30
    rows = [as_sharegpt(row) if sharegpt else row for row, _ in cases.values()]
    data, output, result = runs["sharegpt" if sharegpt else "openai"]
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


def _folders_and_files(tmp_path: Path) -> list[Path]:
    """A folder (a BOM, a nested JSON array, a file that is not data) and one more file."""
    good = [row for row, reason in corpus(RENDERS).values() if reason is None]
    folder = tmp_path / "folder"
    (folder / "nested").mkdir(parents=True)
    (folder / "a.jsonl").write_bytes(b"\xef\xbb\xbf" + jsonl(good[:6]).encode())  # UTF-8 BOM
    sharegpt_array = json.dumps([as_sharegpt(r) for r in good[6:12]], ensure_ascii=False)
    (folder / "nested" / "b.json").write_text(sharegpt_array, "utf-8")
    (folder / "notes.txt").write_text("not data")
    extra = tmp_path / "c.jsonl"
    extra.write_text(jsonl([as_sharegpt(r) for r in good[12:]]), "utf-8")
    return [folder, extra]


def test_folders_json_arrays_bom_and_several_files(qwen36_dir: Path, runs: dict[str, Any]) -> None:
    good = [row for row, reason in corpus(RENDERS).values() if reason is None]
    _, output, result = runs["folders"]
    assert result.returncode == 0, result.stderr[-3000:]
    report = read_report(output)
    assert report["conversations_in"] == len(good)
    assert report["skipped"] == {}
    check_masks(qwen36_dir, load_rows(output), good, RENDERS, with_tools=WITH_TOOLS)
