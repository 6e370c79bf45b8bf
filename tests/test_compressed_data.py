"""JSON lines compressed as gz, bz2, xz or zst give the rows the plain file gives, directly and in a
folder beside plain files; a file a --data folder holds but that is not read is named; zst without
``zstandard`` and a compression that is not read are one line each (data/read/compression.py,
data/read/sources.py).

The compressed files are written here with the standard library (and ``zstandard`` where the
release's folder has it: speculators 0.9.0's, envs/environments.toml) from the suite's own mix
of good and rejected rows. Oracle: prepare_data's run on the same rows as one plain JSONL file,
its rows and counts exactly.
"""

from __future__ import annotations

import bz2
import gzip
import importlib.util
import json
import lzma
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    good_rows,
    last_line,
    prepare,
    prepare_args,
    read_report,
    rejected_rows,
    run_batch,
)
from mask_oracle import load_rows

HAS_ZSTD = importlib.util.find_spec("zstandard") is not None
WORKERS = 8  # the README's --num-preprocessing-workers


def _write(path: Path, text: str) -> Path:
    data = text.encode("utf-8")
    suffix = path.suffix
    if suffix == ".gz":
        data = gzip.compress(data)
    elif suffix == ".bz2":
        data = bz2.compress(data)
    elif suffix == ".xz":
        data = lzma.compress(data)
    elif suffix == ".zst":
        import zstandard

        data = zstandard.ZstdCompressor().compress(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _lines(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, qwen36_dir: Path) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("compressed")
    rows = good_rows(24, seed=5) + [row for _, row in rejected_rows()]
    text = _lines(rows)
    cut = len(rows) // 3
    data: dict[str, Path] = {"plain": _write(work / "plain" / "chats.jsonl", text)}
    for method in ("gz", "bz2", "xz", *(["zst"] if HAS_ZSTD else [])):
        data[method] = _write(work / method / f"chats.jsonl.{method}", text)
    data["array_gz"] = _write(work / "array" / "chats.json.gz", json.dumps(rows))
    # a folder as a Hub download of shards leaves it: one shard compressed, one plain, and a
    # file prepare_data does not read
    folder = work / "shards"
    _write(folder / "train-00000.jsonl.gz", _lines(rows[:cut]))
    _write(folder / "train-00001.jsonl", _lines(rows[cut:]))
    (folder / "stats.csv").write_text("rows,40\n", encoding="utf-8")
    data["shards"] = folder
    outputs = {name: work / "out" / name for name in data}
    cases = {
        name: prepare_args(qwen36_dir, outputs[name], spec, workers=WORKERS)
        for name, spec in data.items()
    }
    return {"results": run_batch(work / "logs", cases), "outputs": outputs, "work": work}


CASES = ["gz", "bz2", "xz", "array_gz", "shards", *(["zst"] if HAS_ZSTD else [])]


@pytest.mark.parametrize("name", CASES)
def test_compressed_json_lines_give_the_plain_rows(runs: dict[str, Any], name: str) -> None:
    for run in (name, "plain"):
        result = runs["results"][run]
        assert result.returncode == 0, (run, result.stderr[-3000:])
    expected = load_rows(runs["outputs"]["plain"])
    assert expected and load_rows(runs["outputs"][name]) == expected
    got, want = read_report(runs["outputs"][name]), read_report(runs["outputs"]["plain"])
    for key in ("conversations_in", "conversations_kept", "rows_out", "skipped", "errors"):
        assert got[key] == want[key], key
    assert want["skipped"], "the rejected rows are counted the same way"


def test_a_file_the_folder_holds_but_is_not_read_is_named(runs: dict[str, Any]) -> None:
    result = runs["results"]["shards"]
    line = last_line(result.stdout)
    assert "not read in" in line and "stats.csv (not a data format" in line, line
    [entry] = read_report(runs["outputs"]["shards"])["data"]
    assert entry["read"] == ["train-00000.jsonl.gz", "train-00001.jsonl"]
    assert list(entry["not_read"]) == ["stats.csv"]
    # a file or folder read whole adds nothing to the last line
    assert "not read" not in last_line(runs["results"]["plain"].stdout)


def test_zst_without_zstandard_is_one_line(
    runs: dict[str, Any], tmp_path: Path, qwen36_dir: Path
) -> None:
    """A venv that never installed zstandard (a package on the path that fails to import, as
    the missing one does)."""
    shim = tmp_path / "shim" / "zstandard"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError(\"No module named 'zstandard'\")\n")
    data = tmp_path / "chats.jsonl.zst"
    data.write_bytes(b"(\xb5/\xfd")  # zstd's magic: what is inside is never read
    path = os.pathsep.join([str(shim.parent), os.environ.get("PYTHONPATH", "")])
    for spec in (data, tmp_path):  # the file, and a folder holding it
        output = tmp_path / f"out-{Path(spec).name}"
        result = prepare(qwen36_dir, output, spec, PYTHONPATH=path)
        assert result.returncode == 1, result.stderr[-2000:]
        error = last_line(result.stderr)
        assert error.startswith("speculators_qwen_compat: error: --data ") and (
            "needs the zstandard package: pip install zstandard" in error
        ), result.stderr[-2000:]
        assert "Traceback" not in result.stderr and not output.exists()


def test_a_compression_that_is_not_read_is_one_line(tmp_path: Path, qwen36_dir: Path) -> None:
    data = tmp_path / "chats.jsonl.lz4"
    data.write_bytes(b"\x04\x22\x4d\x18")
    output = tmp_path / "out"
    result = prepare(qwen36_dir, output, data)
    assert result.returncode == 1
    assert last_line(result.stderr) == (
        f"speculators_qwen_compat: error: --data {data}: .jsonl compressed as .lz4, which is "
        "not read (gz, bz2, xz and zst are): decompress it"
    ), result.stderr[-2000:]
    assert not output.exists()


@pytest.mark.parametrize("method", ["gz", *(["zst"] if HAS_ZSTD else [])])
def test_a_file_cut_short_is_named(tmp_path: Path, qwen36_dir: Path, method: str) -> None:
    """Cut inside its compressed stream: one line naming the file, never a shorter run (a zst
    reader ends quietly at a cut frame unless asked)."""
    whole = _write(tmp_path / f"whole.jsonl.{method}", _lines(good_rows(40))).read_bytes()
    data = tmp_path / f"chats.jsonl.{method}"
    data.write_bytes(whole[: len(whole) * 6 // 10])
    output = tmp_path / "out"
    result = prepare(qwen36_dir, output, data)
    assert result.returncode == 1
    error = last_line(result.stderr)
    assert error.startswith(f"speculators_qwen_compat: error: {data}: cannot be read as "
                            f".{method}-compressed data"), result.stderr[-2000:]  # fmt: skip
    assert "cut short" in error and not output.exists()
