"""The entry point on the demo gallery's strict templates (demo/gallery.py), end to end.

Each template accepts some conversations and rejects others with its own message: the run
completes, the accepted conversations are in the output with the right masks, the rejected ones
are absent and counted under the template's message. On <= 0.7 the ``generation_tags`` template
takes transformers' assistant-mask path (the fixed probe says yes), which supervises the turn's
closing ``<|im_end|>`` as well; the other two take upstream's regex pattern.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from conftest import (
    RELEASE,
    RENDERS,
    good_rows,
    read_report,
    rejected_rows,
    run_batch,
    write_dataset,
)
from mask_oracle import check_masks, load_rows
from packaging.version import Version

from speculators_qwen_compat import demo
from speculators_qwen_compat.demo.gallery import GALLERY, GALLERY_REJECTS, gallery_template
from speculators_qwen_compat.demo.sample_data import REJECTED_REASONS

SEQ_LENGTH = "512"
WITH_TOOLS = Version("0.7") <= RELEASE  # 0.7+ pass a row's tools column to the template

#: Conversation kinds each template rejects (sample_data's rejected kinds, "tool_call" for the
#: good rows with tool turns, and the two below).
REJECTS: dict[str, set[str]] = {
    "alternation": {"tool_call", "no_user", "late_system", "double_user", "assistant_first"},
    "system_first": {"late_system"},
    "generation_tags": {"no_user", "assistant_first"},
}
#: Rejected before the template by the normaliser, whatever the template.
NORMALISER_REJECTS = {"numeric_content"}

EXTRA_ROWS: list[tuple[str, dict[str, Any]]] = [
    (
        "double_user",
        {
            "messages": [
                {"role": "user", "content": "Hi."},
                {"role": "user", "content": "Are you there?"},
                {"role": "assistant", "content": "Yes, here."},
            ]
        },
    ),
    (
        "assistant_first",
        {
            "messages": [
                {"role": "assistant", "content": "How can I help?"},
                {"role": "user", "content": "Name a prime."},
                {"role": "assistant", "content": "Seven."},
            ]
        },
    ),
]


def _kinds() -> list[tuple[str, dict[str, Any]]]:
    good = [("tool_call" if "tools" in row else "good", row) for row in good_rows(12)]
    return good[:6] + rejected_rows() + EXTRA_ROWS + good[6:]


def _reason(template: str, kind: str) -> str | None:
    if kind in NORMALISER_REJECTS:
        return REJECTED_REASONS[kind]
    return GALLERY_REJECTS[template] if kind in REJECTS[template] else None


@pytest.fixture(scope="module")
def gallery_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One prepare_data run per gallery template, all in one interpreter (conftest.run_batch):
    name -> (model folder, output folder, result)."""
    work = tmp_path_factory.mktemp("gallery")
    data = write_dataset(work / "data.jsonl", [row for _, row in _kinds()])
    folders = {}
    for name in GALLERY:
        model = demo.write_model(work / name, template=gallery_template(name))
        folders[name] = (model, work / f"out-{name}")
    cases = {
        name: ["--model", str(model), "--data", str(data), "--output", str(output),
               "--seq-length", SEQ_LENGTH, "--num-preprocessing-workers", "1"]
        for name, (model, output) in folders.items()
    }  # fmt: skip
    results = run_batch(work / "logs", cases)
    return {name: (*folders[name], results[name]) for name in GALLERY}


@pytest.mark.parametrize("name", GALLERY)
def test_gallery_template_masks_and_skips(name: str, gallery_runs: dict[str, Any]) -> None:
    model, output, result = gallery_runs[name]
    kinds = _kinds()
    rows = [row for _, row in kinds]
    assert result.returncode == 0, result.stderr[-3000:]

    kept = [row for kind, row in kinds if _reason(name, kind) is None]
    hf_mask = name == "generation_tags" and not RENDERS
    rows_out = load_rows(output)
    expected = check_masks(model, rows_out, kept, RENDERS, hf_mask, with_tools=WITH_TOOLS)
    if not RENDERS:  # upstream's own log line says which path built the masks
        path = "Using HF assistant token mask" if hf_mask else "Detected assistant pattern"
        assert path in result.stderr

    report = read_report(output)
    reasons = [_reason(name, kind) for kind, _ in kinds]
    assert report["skipped"] == dict(Counter(r for r in reasons if r is not None))
    assert GALLERY_REJECTS[name] in report["skipped"]
    assert report["conversations_in"] == len(rows)
    assert report["rows_out"] == expected


def test_gallery_names_and_errors() -> None:
    assert set(GALLERY) == set(GALLERY_REJECTS) == set(REJECTS)
    for name in GALLERY:
        assert "<|im_start|>" in gallery_template(name)
    assert "{% generation %}" not in gallery_template("alternation")
    assert "generation -%}" in gallery_template("generation_tags")
    with pytest.raises(ValueError, match="no gallery template"):
        gallery_template("nope")
