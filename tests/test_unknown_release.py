"""A release nobody has seen: a copy of the installed one with a target renamed and its own
dist-info version, first on sys.path. Fixes whose targets still fit apply, the renamed one
reports not-applicable, nothing raises, and prepare_data still does its job."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import good_rows, read_report, run_prepare, run_python, write_dataset

SIMULATED = "0.99.0"
RENAMED = "_normalize_conversation"


def _first_on_path(site: Path) -> str:
    """The simulated release first; the rest of PYTHONPATH (the release's folder holding
    transformers and datasets, see tools/release_python.sh) stays behind it."""
    rest = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join(p for p in (str(site), rest) if p)


@pytest.fixture(scope="module")
def simulated_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import speculators

    site = tmp_path_factory.mktemp("site")
    package = site / "speculators"
    shutil.copytree(Path(speculators.__file__).parent, package)
    preprocessing = package / "data_generation" / "preprocessing.py"
    source = preprocessing.read_text()
    assert RENAMED in source
    preprocessing.write_text(source.replace(RENAMED, "_normalise_turns_v2"))
    dist_info = site / f"speculators-{SIMULATED}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: speculators\nVersion: {SIMULATED}\n"
    )
    return site


def test_status_on_an_unknown_release(simulated_site: Path) -> None:
    result = run_python(
        "from speculators_qwen_compat.__main__ import main; main(['status', '--json'])",
        PYTHONPATH=_first_on_path(simulated_site),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["speculators"] == SIMULATED
    assert report["tested"] is False
    states = {p["name"]: p for p in report["patches"]}
    assert states["conversations"]["state"] == "not-applicable"
    assert RENAMED in states["conversations"]["reason"]
    assert states["row_guard"]["state"] == "applied"
    assert states["run_report"]["state"] == "applied"
    assert "failed" not in {p["state"] for p in report["patches"]}


def test_prepare_data_still_works_on_an_unknown_release(
    simulated_site: Path, qwen36_dir: Path, tmp_path: Path
) -> None:
    data = write_dataset(tmp_path / "sharegpt.jsonl", good_rows(8), sharegpt=True)
    output = tmp_path / "out"
    result = run_prepare(
        "--model", str(qwen36_dir), "--data", str(data), "--output", str(output),
        "--seq-length", "512", "--num-preprocessing-workers", "1",
        PYTHONPATH=_first_on_path(simulated_site),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = read_report(output)
    assert report["speculators"] == SIMULATED
    assert report["rows_out"] > 0
    states = {fix["name"]: fix["state"] for fix in report["fixes"]}
    assert states["conversations"] == "not-applicable"  # the copy ran, not the installed one
