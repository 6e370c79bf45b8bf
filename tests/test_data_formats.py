"""Issue 11 end to end: >= 30 real-world data formats in one folder, one prepare_data run; each
row kept with exactly the expected assistant text supervised (format_corpus.py's oracle, written
by hand, not computed by the normaliser), or skipped with its counted reason; the data-quality
warnings fire on the files made to trip them and on no other; cheap runs for the one-line errors
(flat data without a mapping, --strict-data) and the error types upstream's callers catch."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    PACKAGE_MAIN,
    RENDERS,
    REPORT_NAME,
    last_line,
    prepare_args,
    read_report,
    run_batch,
    run_program,
)
from format_corpus import NOTHING, Kept, Skip, formats, quality_files, write_format
from mask_oracle import load_rows

SEQ = 512
TAG = re.compile(r"\(case:([\w-]+):(\d+)\)")
ALPACA = ("--prompt-column", "instruction,input", "--response-column", "output")


def _decode(tokenizer: Any, ids: list[int]) -> str:
    return tokenizer.decode(ids, skip_special_tokens=False)


def _supervised(tokenizer: Any, row: dict[str, list[int]]) -> str:
    """The supervised tokens, each contiguous run decoded on its own, runs joined by " | "."""
    runs, current = [], []
    for token, mask in zip(row["input_ids"], row["loss_mask"], strict=True):
        if mask:
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return " | ".join(_decode(tokenizer, run) for run in runs)


def _check_conversation(name: str, expect: Kept, rows: list[tuple[str, str]]) -> list[str]:
    """rows: (full text, supervised text) of every output row of one conversation; the list of
    what is wrong."""
    want = len(expect.train) if RENDERS else 1
    if len(rows) != want:
        return [f"{name}: {len(rows)} rows, expected {want}"]
    wrong = []
    rows = sorted(rows, key=lambda r: len(r[0]))
    for index, (full, supervised) in enumerate(rows):
        turns = [expect.train[index]] if RENDERS else expect.train
        wrong += [
            f"{name}: {text!r} not supervised in {supervised!r}"
            for turn in turns
            for text in turn
            if text not in supervised
        ]
        if "(case:" in supervised:
            wrong.append(f"{name}: user text supervised: {supervised!r}")
        wrong += [f"{name}: context {t!r} supervised" for t in expect.context if t in supervised]
        wrong += [f"{name}: {t!r} should not be in {full!r}" for t in expect.absent if t in full]
        wrong += [
            f"{name}: {t!r} rendered {full.count(t)} times"
            for t in expect.once
            if full.count(t) > 1
        ]
    full = rows[-1][0]  # the whole conversation (on 0.8+ the last turn's row)
    wrong += [
        f"{name}: context {t!r} missing from {full!r}" for t in expect.context if t not in full
    ]
    wrong += [f"{name}: {t!r} not rendered in {full!r}" for t in expect.once if t not in full]
    return wrong


def _formats_folder(tmp_path: Path) -> Path:
    """Every format of the corpus and the quality files, one folder."""
    folder = tmp_path / "formats"
    folder.mkdir()
    for fmt in formats(RENDERS):
        write_format(folder, fmt)
    for name, (rows, _) in quality_files().items():
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_formats_in_one_run(qwen36_dir: Path, short_runs: dict[str, Any]) -> None:
    from transformers import AutoTokenizer

    cases = formats(RENDERS)
    assert len(cases) >= 30
    quality = quality_files()
    folder = short_runs["paths"]["formats"]
    output = short_runs["paths"]["tmp"] / "formats-out"
    result = short_runs["formats"]
    assert result.returncode == 0, result.stderr[-3000:]
    report = read_report(output)

    skips = Counter(e.reason for f in cases for e in f.expect if isinstance(e, Skip))
    skips[NOTHING] += 4  # the prompt-only rows of the quality files
    assert report["skipped"] == dict(skips)
    rows_in = sum(len(f.rows) for f in cases) + sum(len(r) for r, _ in quality.values())
    assert report["conversations_in"] == rows_in

    tokenizer = AutoTokenizer.from_pretrained(str(qwen36_dir))
    by_tag: dict[tuple[str, int], list[tuple[str, str]]] = defaultdict(list)
    untagged = 0
    output_rows = load_rows(output)
    for row in output_rows:
        full = _decode(tokenizer, row["input_ids"])
        found = TAG.search(full)
        if found:
            by_tag[(found.group(1), int(found.group(2)))].append(
                (full, _supervised(tokenizer, row))
            )
        else:
            untagged += 1
    kept = 0
    wrong: list[str] = []
    for fmt in cases:
        for k, expect in enumerate(fmt.expect):
            rows = by_tag.pop((fmt.name, k), [])
            if isinstance(expect, Skip):
                if rows:
                    wrong.append(f"{fmt.name}:{k} should have been skipped")
                continue
            wrong += _check_conversation(f"{fmt.name}:{k}", expect, rows)
            kept += len(rows)
    assert not wrong, "\n".join(wrong)
    assert not by_tag, f"rows of unexpected conversations: {sorted(by_tag)}"
    assert untagged == 28  # the quality files' kept rows: one assistant turn each
    assert report["rows_out"] == len(output_rows) == kept + untagged

    warnings = report["warnings"]
    fired = {kind for _, kinds in quality.values() for kind in kinds}
    assert set(warnings) == fired
    for name, (_, kinds) in quality.items():
        for kind in kinds:
            assert any(f"{name}.jsonl" in d for d in warnings[kind]["details"]), (name, kind)
    named = {d.split(":")[0] for entry in warnings.values() for d in entry["details"]}
    assert {Path(n).stem for n in named} <= set(quality), f"ordinary files warned: {named}"
    assert warnings["placeholder_replies"]["count"] == 16
    assert warnings["duplicate_conversations"]["count"] == 2
    assert warnings["prompt_only_rows"]["count"] == 4
    assert "regenerate-responses" in warnings["placeholder_replies"]["what_to_do"]
    line = last_line(result.stdout)
    assert line.startswith(f"wrote {len(output_rows)} rows to {output}; skipped {skips.total()} of")
    assert "data warnings: 16 placeholder replies" in line and "regenerate-responses" in line
    if RENDERS:
        assert report["notes"] == {
            "turns with role 'Qwen3-32B' treated as assistant, as speculators "
            f"{report['speculators'].rsplit('.', report['speculators'].count('.') - 1)[0]} does": 1
        }
    else:
        (note,) = report["notes"]
        assert note.startswith("turns with role 'Qwen3-32B' dropped, as speculators 0.")
    assert report["columns"][str(folder / "lmsys_chat_1m.jsonl")] == {"conversation": 1}
    assert report["columns"][str(folder / "alpaca.json")] == {"instruction+input->output": 2}
    assert report["columns"][str(folder / "turns_other_column.jsonl")] == {"dialog": 1}
    assert "conversations from column 'dialog' (1 rows)" in result.stderr


@pytest.fixture(scope="module")
def short_runs(qwen36_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The runs of this module's tests (every format in one run, flat data, --strict-data,
    doctor, a bad --unknown-roles) in one interpreter (conftest.run_batch): name -> result,
    and paths."""
    tmp_path = tmp_path_factory.mktemp("short")
    # Open-Orca/OpenOrca card: id, system_prompt, question, response
    orca = tmp_path / "orca.jsonl"
    row = {"id": "niv.1", "system_prompt": "You are an AI assistant.",
           "question": "Translate 'hi'.", "response": "Bonjour."}  # fmt: skip
    orca.write_text(json.dumps(row) + "\n")
    placeholder = tmp_path / "ok.jsonl"
    rows, _ = quality_files()["placeholder_ok"]
    placeholder.write_text("".join(json.dumps(r) + "\n" for r in rows))
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "ok.jsonl").write_text(placeholder.read_text())
    for fmt in formats(RENDERS):
        if fmt.name in ("sharegpt_vicuna", "on_policy_model_roles"):
            write_format(folder, fmt)
    formats_folder = _formats_folder(tmp_path)
    cases = {
        "formats": prepare_args(qwen36_dir, tmp_path / "formats-out", formats_folder,
                                extra=ALPACA, seq_length=SEQ),
        "orca": prepare_args(qwen36_dir, tmp_path / "o", orca),
        "strict": prepare_args(qwen36_dir, tmp_path / "s", placeholder, extra=("--strict-data",)),
        "doctor": ["doctor", "--model", str(qwen36_dir), "--data", str(folder),
                   "--seq-length", "512", "--unknown-roles", "skip"],
        "bad_roles": ["--unknown-roles", "x"],
    }  # fmt: skip
    results = run_batch(tmp_path / "logs", cases, {"doctor": PACKAGE_MAIN})
    paths = {"tmp": tmp_path, "orca": orca, "folder": folder, "formats": formats_folder}
    return {"paths": paths, **results}


def test_flat_data_error_names_the_mapping_and_strict_data_is_fatal(
    short_runs: dict[str, Any],
) -> None:
    orca, tmp_path = short_runs["paths"]["orca"], short_runs["paths"]["tmp"]
    result = short_runs["orca"]
    assert result.returncode == 1
    assert last_line(result.stderr) == (
        f"speculators_qwen_compat: error: {orca}: no conversation column (columns found: id, "
        "question, response, system_prompt); this looks like flat instruction data: pass "
        "--prompt-column question --response-column response --system-column system_prompt"
    )
    strict = short_runs["strict"]
    assert strict.returncode == 1
    message = last_line(strict.stderr)
    assert message.startswith("speculators_qwen_compat: error: --strict-data: data warnings: 8 ")
    assert "regenerate-responses" in message and "the dataset was not written" in message
    assert not (tmp_path / "s" / REPORT_NAME).exists()


def test_our_errors_are_the_types_upstream_raises(tmp_path: Path) -> None:
    result = run_program("error_types", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    folder, missing = out["folder"], out["file"]
    assert folder[1:4] == [True, False, True], folder  # ValueError, as upstream's "No .json/..."
    assert "No .json/.jsonl files found" in folder[4]  # upstream's words: its tests match them
    assert missing[1:4] == [False, True, True], missing  # datasets' FileNotFoundError


def test_doctor_names_the_warnings(short_runs: dict[str, Any]) -> None:
    folder = short_runs["paths"]["folder"]
    result = short_runs["doctor"]
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "  data warnings: 2" in out
    assert f"    8 placeholder replies: {folder / 'ok.jsonl'}: 8 of 8 replies are 'OK.'" in out
    assert "    8 boilerplate replies: " in out
    assert "what to do: a drafter trained on them learns to say them: regenerate" in out
    assert "sharegpt_vicuna" not in out.split("data warnings")[1].split("sample (")[0]
    assert "    1 x \"unknown role 'Qwen3-32B'\" (e.g. " in out  # --unknown-roles skip
    bad = short_runs["bad_roles"]
    assert last_line(bad.stderr) == (
        "speculators_qwen_compat: error: --unknown-roles x: choose one of release, assistant, "
        "drop, skip"
    )
