"""The token_frequency fix writes upstream's file: the same ids, counts, order and bytes as
upstream's own ``save_token_frequency_distribution`` on the same dataset (the oracle is
upstream's function, run beside the fixed one in one interpreter:
programs/token_frequency_probe.py): many rows, several Arrow batches, an indices mapping.
Once (``pure``, on the newest release: upstream's count is the same loop in every release); on
0.5.0-0.8.1, which write the file by default, the file of a real prepare_data run is checked
against its rows (test_prepare_data_e2e.py::test_seed_command_line)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_program

pytestmark = pytest.mark.pure


def test_the_batched_count_writes_upstreams_file(tmp_path: Path) -> None:
    result = run_program("token_frequency_probe", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["state"] == "applied"
    assert not report["oracle_wrapped"], "the oracle must be upstream's function as shipped"
    # upstream's loop calls Tensor.unique once per row; the fix's path none (it ran, not a
    # fallback to upstream's loop)
    assert (report["upstream_unique_calls"], report["fixed_unique_calls"]) == (report["rows"], 0)
    assert report["ids"] > 2000  # the probe's data reached the count
    assert report == {**report, "same_counts": True, "same_order": True, "same_bytes": True}
