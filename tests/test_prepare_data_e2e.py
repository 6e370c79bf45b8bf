"""The entry point end to end: real speculators, transformers, datasets and Arrow output.

Both formats, with rejected rows mixed in, on a Qwen3.6-style (thinking on) and a
Qwen3.5-small-style (thinking off) template: the run completes, every good conversation is in
the output with the right mask, every rejected one is counted under the template's reason.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from conftest import (
    RELEASE,
    RENDERS,
    as_written,
    good_rows,
    last_line,
    prepare,
    read_report,
    rejected_rows,
    run_prepare,
    write_dataset,
)
from mask_oracle import check_masks, load_rows
from packaging.version import Version

from speculators_qwen_compat.demo.sample_data import REJECTED_REASONS

SEQ_LENGTH = 512
WITH_TOOLS = Version("0.7") <= RELEASE  # 0.7+ pass a row's tools column to the template


@pytest.mark.parametrize("sharegpt", [False, True], ids=["openai", "sharegpt"])
def test_both_formats_with_rejected_rows(model_dir: Path, tmp_path: Path, sharegpt: bool) -> None:
    good = good_rows(24)
    rejected = rejected_rows()
    rows = good[:12] + [row for _, row in rejected] + good[12:]
    data = write_dataset(tmp_path / "data.jsonl", rows, sharegpt=sharegpt)
    output = tmp_path / "out"

    result = prepare(model_dir, output, data)
    assert result.returncode == 0, result.stderr[-3000:]

    good = as_written(good, sharegpt)
    expected = check_masks(model_dir, load_rows(output), good, RENDERS, with_tools=WITH_TOOLS)

    report = read_report(output)
    want = Counter(REJECTED_REASONS[kind] for kind, _ in rejected)
    assert report["skipped"] == dict(want)
    assert report["conversations_in"] == len(rows)
    assert report["rows_out"] == expected
    assert report["speculators"] == str(RELEASE)
    summary = last_line(result.stdout)
    assert summary.startswith(f"wrote {expected} rows to {output}; skipped 4 of {len(rows)}")
    assert '2 x "No user query found in messages."' in summary


@pytest.mark.parametrize("sharegpt", [True, False], ids=["sharegpt", "openai"])
def test_seed_command_line(qwen36_dir: Path, tmp_path: Path, sharegpt: bool) -> None:
    """The issue's command line, unchanged but for a local model and --seq-length 512, on data
    with rejected rows mixed in, over a folder holding a stale dataset."""
    good = good_rows(30)
    rows = good[:15] + [row for _, row in rejected_rows()] + good[15:]
    data = write_dataset(tmp_path / "all_prompts_sharegpt.jsonl", rows, sharegpt=sharegpt)
    (tmp_path / "tokenized").mkdir()
    (tmp_path / "tokenized" / "data-00000-of-00001.arrow").write_bytes(b"stale")
    result = run_prepare(
        "--model", str(qwen36_dir), "--data", data.name, "--output", "tokenized",
        "--max-samples", "800000", "--seq-length", "512",
        "--num-preprocessing-workers", "2", "--overwrite",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    files = {p.name for p in (tmp_path / "tokenized").iterdir()}
    assert {"dataset_info.json", "state.json", "compat_report.json"} <= files
    assert any(name.endswith(".arrow") for name in files)
    if not RENDERS:  # 0.9 skips token frequencies by default (--skip-token-freq)
        assert "token_freq.pt" in files
    rows_out = load_rows(tmp_path / "tokenized")
    check_masks(qwen36_dir, rows_out, as_written(good, sharegpt), RENDERS, with_tools=WITH_TOOLS)
    assert read_report(tmp_path / "tokenized")["conversations_in"] == len(rows)


def test_file_mixing_formats_row_by_row(qwen36_dir: Path, tmp_path: Path) -> None:
    good = good_rows(12)
    data = tmp_path / "mixed.jsonl"
    write_dataset(data, good[::2])
    with data.open("a", encoding="utf-8") as fh:
        fh.write(write_dataset(tmp_path / "sg.jsonl", good[1::2], sharegpt=True).read_text())
    good = good[::2] + as_written(good[1::2], sharegpt=True)
    output = tmp_path / "out"
    result = prepare(qwen36_dir, output, data)
    assert result.returncode == 0, result.stderr[-3000:]
    check_masks(qwen36_dir, load_rows(output), good, RENDERS, with_tools=WITH_TOOLS)
    assert read_report(output)["skipped"] == {}


def test_conversations_key_names_another_column(qwen36_dir: Path, tmp_path: Path) -> None:
    rows = [{"dialogue": row["messages"]} for row in good_rows(6)]
    data = write_dataset(tmp_path / "d.jsonl", rows)
    output = tmp_path / "out"
    result = prepare(qwen36_dir, output, data, extra=("--conversations-key", "dialogue"), workers=1)
    assert result.returncode == 0, result.stderr[-3000:]
    assert read_report(output)["conversations_in"] == 6
    assert load_rows(output)


def test_help_lists_release_flags_and_ours() -> None:
    result = run_prepare("--help")
    assert result.returncode == 0, result.stderr
    for flag in (
        "--model",
        "--data",
        "--output",
        "--seq-length",
        "--max-samples",
        "--num-preprocessing-workers",
        "--overwrite",
        "--conversations-key",
        "--debug",
    ):
        assert flag in result.stdout
    assert ("--render-endpoint" in result.stdout) == RENDERS
    assert ("--turn-dropout" in result.stdout) == (Version("0.7") > RELEASE)
