"""The entry point end to end: real speculators, transformers, datasets and Arrow output.

Both formats, with rejected rows mixed in, on a Qwen3.6-style (thinking on) and a
Qwen3.5-small-style (thinking off) template, through the seed's command line (one run per
format and template, shared by the tests that check it; the module's runs share one
interpreter, conftest.run_batch): the run completes, every good
conversation is in the output with the right mask, every rejected one is counted under the
template's reason.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    RELEASE,
    RENDERS,
    REPORT_NAME,
    as_written,
    good_rows,
    last_line,
    prepare_args,
    read_report,
    rejected_rows,
    run_batch,
    run_prepare,
    write_dataset,
)
from mask_oracle import check_masks, load_rows
from packaging.version import Version

from speculators_qwen_compat.demo.sample_data import REJECTED_REASONS

SEQ_LENGTH = 512
WITH_TOOLS = Version("0.7") <= RELEASE  # 0.7+ pass a row's tools column to the template


@dataclass
class SeedRun:
    """One run of the seed's command line: its folder, data, result and the good rows."""

    folder: Path
    rows: list[dict[str, Any]]
    good: list[dict[str, Any]]
    result: subprocess.CompletedProcess | None = None

    @property
    def output(self) -> Path:
        return self.folder / "tokenized"


def _seed_case(folder: Path, sharegpt: bool) -> SeedRun:
    """Data with rejected rows mixed in, over a folder holding a stale dataset."""
    good = good_rows(30)
    rows = good[:15] + [row for _, row in rejected_rows()] + good[15:]
    write_dataset(folder / "all_prompts_sharegpt.jsonl", rows, sharegpt=sharegpt)
    (folder / "tokenized").mkdir()
    (folder / "tokenized" / "data-00000-of-00001.arrow").write_bytes(b"stale")
    return SeedRun(folder, rows, as_written(good, sharegpt))


def _seed_args(model: Path) -> list[str]:
    """The issue's command line, unchanged but for a local model and --seq-length 512."""
    return [
        "--model", str(model), "--data", "all_prompts_sharegpt.jsonl", "--output", "tokenized",
        "--max-samples", "800000", "--seq-length", "512",
        "--num-preprocessing-workers", "2", "--overwrite",
    ]  # fmt: skip


@pytest.fixture(scope="module")
def runs(
    qwen36_dir: Path, qwen35_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Every run of this module in one interpreter (conftest.run_batch): the seed's command
    line per template and format (in the data's folder, as the issue ran it), a file mixing
    the formats row by row, and another conversation column. ``seed``: (model, sharegpt) ->
    SeedRun; ``short``: name -> (the good rows as written, output folder, result)."""
    work = tmp_path_factory.mktemp("e2e")
    seeds: dict[tuple[str, bool], SeedRun] = {}
    cases: dict[str, list[str]] = {}
    cwd: dict[str, Path] = {}
    for model in (qwen36_dir, qwen35_dir):
        for sharegpt in (False, True):
            name = f"seed-{model.name}-{'sharegpt' if sharegpt else 'openai'}"
            seeds[(str(model), sharegpt)] = _seed_case(work / name, sharegpt)
            cases[name], cwd[name] = _seed_args(model), work / name
    good = good_rows(12)
    mixed = work / "mixed.jsonl"
    write_dataset(mixed, good[::2])
    with mixed.open("a", encoding="utf-8") as fh:
        fh.write(write_dataset(work / "sg.jsonl", good[1::2], sharegpt=True).read_text())
    dialogue = [{"dialogue": row["messages"]} for row in good_rows(6)]
    keyed = write_dataset(work / "d.jsonl", dialogue)
    places = {
        "mixed": (good[::2] + as_written(good[1::2], sharegpt=True), work / "out-mixed"),
        "key": (dialogue, work / "out-key"),
    }
    cases["mixed"] = prepare_args(qwen36_dir, places["mixed"][1], mixed)
    cases["key"] = prepare_args(qwen36_dir, places["key"][1], keyed,
                                extra=("--conversations-key", "dialogue"), workers=1)  # fmt: skip
    results = run_batch(work / "logs", cases, cwd=cwd)
    for seed in seeds.values():
        seed.result = results[seed.folder.name]
    return {
        "seed": seeds,
        "short": {name: (*places[name], results[name]) for name in places},
    }


@pytest.mark.parametrize("sharegpt", [False, True], ids=["openai", "sharegpt"])
def test_both_formats_with_rejected_rows(
    model_dir: Path, runs: dict[str, Any], sharegpt: bool
) -> None:
    run = runs["seed"][(str(model_dir), sharegpt)]
    result = run.result
    assert result.returncode == 0, result.stderr[-3000:]

    expected = check_masks(model_dir, load_rows(run.output), run.good, RENDERS,
                           with_tools=WITH_TOOLS)  # fmt: skip

    report = read_report(run.output)
    want = Counter(REJECTED_REASONS[kind] for kind, _ in rejected_rows())
    assert report["skipped"] == dict(want)
    assert report["conversations_in"] == len(run.rows)
    assert report["rows_out"] == expected
    assert report["speculators"] == str(RELEASE)
    summary = last_line(result.stdout)
    assert summary.startswith(f"wrote {expected} rows to tokenized; skipped 4 of {len(run.rows)}")
    assert '2 x "No user query found in messages."' in summary


@pytest.mark.parametrize("sharegpt", [True, False], ids=["sharegpt", "openai"])
def test_seed_command_line(qwen36_dir: Path, runs: dict[str, Any], sharegpt: bool) -> None:
    """The seed's command line (the run above, on the Qwen3.6-style template): the files
    upstream writes over the stale dataset, masks and counts."""
    run = runs["seed"][(str(qwen36_dir), sharegpt)]
    assert run.result.returncode == 0, run.result.stderr[-3000:]
    files = {p.name for p in run.output.iterdir()}
    assert {"dataset_info.json", "state.json", REPORT_NAME} <= files
    assert any(name.endswith(".arrow") for name in files)
    if not RENDERS:  # 0.9 skips token frequencies by default (--skip-token-freq)
        assert "token_freq.pt" in files
    rows_out = load_rows(run.output)
    if "token_freq.pt" in files:  # the token_frequency fix's count, against the rows written
        import torch

        saved = torch.load(run.output / "token_freq.pt", weights_only=True)
        assert list(saved.items()) == list(supervised_token_counts(rows_out).items())
    check_masks(qwen36_dir, rows_out, run.good, RENDERS, with_tools=WITH_TOOLS)
    assert read_report(run.output)["conversations_in"] == len(run.rows)


def supervised_token_counts(rows: list[dict[str, list[int]]]) -> Counter[int]:
    """Upstream's count as its loop defines it (0.5.0 ``train/vocab_mapping.py:35-42``): per
    row the supervised ids ascending with their counts, added to a Counter in row order."""
    counts: Counter[int] = Counter()
    for row in rows:
        pairs = zip(row["input_ids"], row["loss_mask"], strict=True)
        supervised = Counter(token for token, mask in pairs if mask)
        counts.update(dict(sorted(supervised.items())))
    return counts


def test_file_mixing_formats_row_by_row(qwen36_dir: Path, runs: dict[str, Any]) -> None:
    good, output, result = runs["short"]["mixed"]
    assert result.returncode == 0, result.stderr[-3000:]
    check_masks(qwen36_dir, load_rows(output), good, RENDERS, with_tools=WITH_TOOLS)
    assert read_report(output)["skipped"] == {}


def test_conversations_key_names_another_column(runs: dict[str, Any]) -> None:
    _, output, result = runs["short"]["key"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert read_report(output)["conversations_in"] == 6
    assert load_rows(output)


def test_help_lists_release_flags_and_ours() -> None:
    """A process of its own: rich sizes the help to the terminal once per interpreter."""
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
    if RENDERS:  # ours: local by default, where upstream's text says a server is required
        words = " ".join(result.stdout.replace("│", " ").split())
        assert "'local' (the default when the flag is omitted" in words, result.stdout
        assert "Required unless" not in words
    assert ("--turn-dropout" in result.stdout) == (Version("0.7") > RELEASE)
