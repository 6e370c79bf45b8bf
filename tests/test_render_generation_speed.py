"""The speed fix of 0.8+ gives upstream's answers: ``row_tensors`` the statuses and tensors of
upstream's own ``_append_row`` (as shipped, unwrapped: the oracle) on every row the demo mix
renders to, at several windows and minimum supervised counts, and on the inputs it hands back,
beside a count showing the fixed path ran (no element-by-element ``torch.tensor``).
programs/render_generation_speed_probe.py runs it in one interpreter of this release. 0.5-0.7
have no such target (its state there, not-needed, is checked by test_activation.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import RENDERS, run_program

pytestmark = pytest.mark.skipif(not RENDERS, reason="0.5-0.7: rows are tensorized by the tokenizer")


@pytest.fixture(scope="module")
def report(qwen36_dir: Path) -> dict[str, Any]:
    result = run_program("render_generation_speed_probe", str(qwen36_dir))
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_row_tensors_are_upstreams(report: dict[str, Any]) -> None:
    assert report["state"] == "applied"
    rows = report["rows"]
    assert rows["differ"] == []
    # real rows were compared, and each of upstream's answers came up
    assert rows["cases"] > 500
    assert {"kept", "unsupervised", "filtered"} <= set(rows["answers"])
    assert any(answer.startswith("raises") for answer in rows["answers"])
    kept = rows["answers"]["kept"]
    assert rows["upstream_tensor_calls"] >= 2 * kept  # two per kept row
    assert rows["fixed_tensor_calls_on_rendered_rows"] == 0
