"""prepare_data end to end with the real Qwen3.5/3.6 vocabulary (248,077 tokens, byte-level BPE),
beside the tiny demo tokenizer the other end-to-end tests use.

The model folder holds the real vocabulary (built by ``make vocab``, see tests/qwen_vocab.py) and
the project's Qwen3.6-style (thinking on) or Qwen3.5-style (thinking off) strict template. One
prepare_data run per (data format, template): the hostile corpus and the sample conversations,
rejected rows mixed in. On <= 0.7 the masks come from upstream's regex over the rendered text
(token offsets of a 248k vocabulary, where one token can hold a whole word and its leading
space); on 0.8+ from render boundaries (token-prefix comparison of prompt and full renders). The
mask oracle checks every token of every row against the raw rows as written.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    RELEASE,
    RENDERS,
    as_written,
    good_rows,
    prepare_args,
    read_report,
    rejected_rows,
    run_batch,
)
from hostile_corpus import as_sharegpt, corpus, jsonl
from mask_oracle import check_masks, load_rows
from packaging.version import Version
from qwen_vocab import copy_vocab

from speculators_qwen_compat import demo
from speculators_qwen_compat.demo.sample_data import REJECTED_REASONS

SEQ = 512
WITH_TOOLS = Version("0.7") <= RELEASE  # 0.7+ pass a row's tools column to the template
#: One run per data format, each with one of the two template styles.
RUNS = [("openai", "qwen36"), ("sharegpt", "qwen35")]


def real_model(destination: Path, style: str) -> Path:
    """A model folder: the real vocabulary and the project's template of ``style``."""
    copy_vocab(destination)
    (destination / "chat_template.jinja").write_text(demo.chat_template(style), encoding="utf-8")
    return destination


def _rows() -> tuple[list, list, list, list]:
    """(hostile cases, sample conversations, rejected ones, every row in file order)."""
    cases = list(corpus(RENDERS).values())
    samples = good_rows(12, seed=11)
    rejected = rejected_rows()
    rows = [row for row, _ in cases] + samples[:6] + [row for _, row in rejected] + samples[6:]
    return cases, samples, rejected, rows


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Both runs in one interpreter (conftest.run_batch): name -> (model, output, result)."""
    work = tmp_path_factory.mktemp("real-vocab")
    places, cases = {}, {}
    for fmt, style in RUNS:
        name = f"{fmt}-{style}"
        model = real_model(work / name / "model", style)
        rows = _rows()[3]
        written = [as_sharegpt(row) for row in rows] if fmt == "sharegpt" else rows
        data = work / name / "data.jsonl"
        data.write_text(jsonl(written), "utf-8")
        (work / name / "cat.png").write_bytes(b"")  # image_by_path's file, beside the data
        places[name] = (model, work / name / "out")
        cases[name] = prepare_args(model, places[name][1], data, seq_length=SEQ)
    results = run_batch(work / "logs", cases)
    return {name: (*places[name], results[name]) for name in places}


@pytest.mark.parametrize(("fmt", "style"), RUNS, ids=[f"{f}-{s}" for f, s in RUNS])
def test_real_vocabulary_masks_and_skips(runs: dict[str, Any], fmt: str, style: str) -> None:
    model, output, result = runs[f"{fmt}-{style}"]
    sharegpt = fmt == "sharegpt"
    cases, samples, rejected, rows = _rows()
    assert result.returncode == 0, result.stderr[-3000:]

    good = [as_sharegpt(r) if sharegpt else r for r, reason in cases if reason is None]
    good += as_written(samples, sharegpt)
    expected = check_masks(model, load_rows(output), good, RENDERS, with_tools=WITH_TOOLS)
    report = read_report(output)
    want = Counter(reason for _, reason in cases if reason)
    want += Counter(REJECTED_REASONS[kind] for kind, _ in rejected)
    assert report["skipped"] == dict(want)
    assert report["conversations_in"] == len(rows)
    assert report["rows_out"] == expected
