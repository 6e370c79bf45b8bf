"""A release that reorders the parameters of a function a fix reads: a copy of the installed
release whose def and upstream's own positional call site both change order. The fix either
reports not-applicable or reads the right values (the skipped rows' reasons and file:line
sources are right); it never reads another parameter's value."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import good_rows, read_report, rejected_rows, run_prepare, write_dataset
from simulated_release import first_on_path, make_site

from speculators_qwen_compat.core.fix import FixState
from speculators_qwen_compat.demo.sample_data import REJECTED_REASONS

SIMULATED = "0.99.1"
#: (old text, new text) in preprocessing.py: the def and its positional call site swap two
#: parameters, as a release that reorders them consistently would.
REORDERINGS = {
    "render generation": [
        ("    idx: int,\n    render_endpoint: str,\n    max_length: int,\n) -> list[Boundary",
         "    max_length: int,\n    render_endpoint: str,\n    idx: int,\n) -> list[Boundary"),
        ("            idx,\n            render_endpoint,\n            max_length,\n        )",
         "            max_length,\n            render_endpoint,\n            idx,\n        )"),
    ],
    "script generation": [
        ("    examples: dict,\n    {proc}: {kind},\n    max_length: int,\n",
         "    examples: dict,\n    max_length: int,\n    {proc}: {kind},\n"),
        ("_preprocess_batch(\n{pad}examples,\n{pad}{proc},\n{pad}max_length,\n",
         "_preprocess_batch(\n{pad}examples,\n{pad}max_length,\n{pad}{proc},\n"),
    ],
}  # fmt: skip


def _reordered(source: str) -> str:
    if "def _render_conversation_rows(" in source:
        edits = REORDERINGS["render generation"]
    else:
        proc, kind = (
            ("tokenizer", "PreTrainedTokenizerBase")
            if "    tokenizer: PreTrainedTokenizerBase,\n    max_length" in source
            else ("processor", "ProcessorLike")
        )
        call = re.search(r"lambda examples: _preprocess_batch\(\n( +)examples", source)
        assert call is not None
        pad = call.group(1)  # the call site's indentation differs between releases
        edits = [
            (a.format(proc=proc, kind=kind, pad=pad), b.format(proc=proc, kind=kind, pad=pad))
            for a, b in REORDERINGS["script generation"]
        ]
    for old, new in edits:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    return source


@pytest.fixture(scope="module")
def reordered_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_site(tmp_path_factory.mktemp("site"), SIMULATED, _reordered)


def test_reordered_parameters_never_give_wrong_values(
    reordered_site: Path, qwen36_dir: Path, tmp_path: Path
) -> None:
    good = good_rows(6)
    rejected = rejected_rows()
    data = write_dataset(tmp_path / "d.jsonl", good + [row for _, row in rejected])
    output = tmp_path / "out"
    result = run_prepare(
        "--model", str(qwen36_dir), "--data", str(data), "--output", str(output),
        "--seq-length", "512", "--num-preprocessing-workers", "1",
        PYTHONPATH=first_on_path(reordered_site),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = read_report(output)
    assert report["speculators"] == SIMULATED  # the reordered copy ran
    states = {fix["name"]: fix for fix in report["fixes"]}
    if states["row_guard"]["state"] == FixState.NOT_APPLICABLE:
        return  # refusing is allowed; reading the wrong argument is not
    assert states["row_guard"]["state"] == FixState.APPLIED
    assert report["conversations_in"] == len(good) + len(rejected)
    assert report["rows_out"] > 0
    expected: dict[str, list[str]] = {}
    for n, (kind, _) in enumerate(rejected, start=len(good) + 1):
        expected.setdefault(REJECTED_REASONS[kind], []).append(f"{data}:{n}")
    assert report["skipped_examples"] == expected, json.dumps(report, indent=1)
