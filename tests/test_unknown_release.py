"""A release nobody has seen: a copy of the installed one with a target renamed and its own
dist-info version, first on sys.path. Fixes whose targets still fit apply, the renamed one
reports not-applicable, nothing raises, and prepare_data still does its job."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import PACKAGE_MAIN, good_rows, prepare_args, read_report, run_batch, write_dataset
from simulated_release import first_on_path, make_site

from speculators_qwen_compat.core.fix import FixState

SIMULATED = "0.99.0"
RENAMED = "_normalize_conversation"


@pytest.fixture(scope="module")
def simulated_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def renamed(source: str) -> str:
        assert RENAMED in source
        return source.replace(RENAMED, "_normalise_turns_v2")

    return make_site(tmp_path_factory.mktemp("site"), SIMULATED, renamed)


@pytest.fixture(scope="module")
def runs(
    simulated_site: Path, qwen36_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """``status --json`` and a prepare_data run on the simulated release, in one interpreter
    with the simulated release first on its path (conftest.run_batch)."""
    work = tmp_path_factory.mktemp("unknown")
    data = write_dataset(work / "sharegpt.jsonl", good_rows(8), sharegpt=True)
    output = work / "out"
    cases = {
        "status": ["status", "--json"],
        "prepare": prepare_args(qwen36_dir, output, data, workers=1),
    }
    results = run_batch(
        work / "logs", cases, {"status": PACKAGE_MAIN}, PYTHONPATH=first_on_path(simulated_site)
    )
    return {"output": output, **results}


def test_status_on_an_unknown_release(runs: dict[str, Any]) -> None:
    result = runs["status"]
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["speculators"] == SIMULATED
    assert report["tested"] is False
    states = {p["name"]: p for p in report["patches"]}
    assert states["conversations"]["state"] == FixState.NOT_APPLICABLE
    assert RENAMED in states["conversations"]["reason"]
    assert states["row_guard"]["state"] == FixState.APPLIED
    assert states["run_report"]["state"] == FixState.APPLIED
    assert FixState.FAILED not in {p["state"] for p in report["patches"]}


def test_prepare_data_still_works_on_an_unknown_release(runs: dict[str, Any]) -> None:
    output, result = runs["output"], runs["prepare"]
    assert result.returncode == 0, result.stderr[-3000:]
    report = read_report(output)
    assert report["speculators"] == SIMULATED
    assert report["rows_out"] > 0
    states = {fix["name"]: fix["state"] for fix in report["fixes"]}
    assert states["conversations"] == FixState.NOT_APPLICABLE  # the copy ran, not the installed one
