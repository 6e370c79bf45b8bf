"""The streaming reader (data/read/files.py), in-process: rows and their file:line or file[i] from
JSON lines and JSON arrays read in chunks far smaller than a row, BOMs, blank lines, errors that
name the line, and the memory-mapped Arrow file it writes under datasets' cache."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.data.read import files
from speculators_qwen_compat.data.read.files import LINE_COLUMN, SOURCE_COLUMN, RowStream

ROWS = [
    {
        "messages": [
            {"role": "user", "content": "é\u2028" * i},
            {"role": "assistant", "content": "ok"},
        ]
    }
    for i in range(12)
] + [{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}]


@pytest.fixture(autouse=True)
def tiny_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "CHUNK_BYTES", 5)  # every row spans several chunks
    monkeypatch.setattr(files, "BATCH_ROWS", 4)


def test_json_array_items_keep_their_index_and_text(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    body = ",\n  ".join(json.dumps(r, ensure_ascii=False) for r in ROWS)
    path.write_text("\ufeff [\n  " + body + "\n]\n", "utf-8")
    got = list(files.file_rows(path))
    assert [json.loads(r.text) for r in got] == ROWS
    assert [r.source for r in got] == [f"{path}[{i}]" for i in range(len(ROWS))]


def test_json_lines_keep_exact_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    lines = [json.dumps(r, ensure_ascii=False) for r in ROWS[:3]]
    path.write_bytes(("\ufeff" + lines[0] + "\r\n\n   \n" + lines[1] + "\n" + lines[2]).encode())
    got = list(files.file_rows(path))
    assert [r.source for r in got] == [f"{path}:1", f"{path}:4", f"{path}:5"]
    assert [json.loads(r.text) for r in got] == ROWS[:3]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('[{"a": 1},\n{"b": 2}\n{"c": 3}]', ":3: not valid JSON (Expecting ',' delimiter"),
        ('[{"a": 1},\n {"b": ', ":2: not valid JSON (Expecting value at column 8"),
        ("[1, 2] x", ":1: not valid JSON (Extra data at column 8"),
    ],
)
def test_broken_json_array_names_the_line(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, "utf-8")
    with pytest.raises(CompatError) as caught:
        list(files.file_rows(path))
    assert str(caught.value).startswith(f"{path}{where}")


def test_non_utf8_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "latin.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": "\xff"}\n')
    with pytest.raises(CompatError) as caught:
        list(files.file_rows(path))
    assert str(caught.value).startswith(f"{path}:2: not UTF-8 text (byte 16)")


def test_rows_go_to_a_memory_mapped_arrow_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datasets import config

    monkeypatch.setattr(config, "HF_DATASETS_CACHE", tmp_path / "cache")
    first, second = tmp_path / "a.jsonl", tmp_path / "b.json"
    first.write_text("".join(json.dumps(r) + "\n" for r in ROWS[:7]), "utf-8")
    second.write_text(json.dumps(ROWS[7:]), "utf-8")
    dataset = files.load_rows([first, second], None)
    assert dataset.num_rows == len(ROWS)
    assert dataset.cache_files and str(tmp_path / "cache") in dataset.cache_files[0]["filename"]
    assert len(pickle.dumps(dataset)) < 5000  # workers get the path, not the rows
    assert [json.loads(t) for t in dataset[LINE_COLUMN]] == ROWS
    assert dataset[SOURCE_COLUMN][7] == f"{second}[0]"


def test_pretokenized_data_is_left_to_upstream(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"input_ids": [1, 2], "loss_mask": [0, 1]}\n', "utf-8")
    stream = RowStream([path], None)
    assert list(stream) == [] and stream.pretokenized
