"""tools/matrix.py: a test pass whose selection matches no test fails the matrix (issue 30).

pytest ends a run that collected nothing with exit 5; the matrix used to count that as a pass,
so a tier whose marker stopped matching went green without running a test. Here the matrix's
own ``pytest_pass`` runs a real pytest (this release's interpreter, as ``make test`` does) on a
folder of one test, once with a marker that matches it and once with one that matches nothing.
"""

from __future__ import annotations

import importlib.util
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

pytestmark = pytest.mark.pure  # release-independent: run once (tools/matrix.py)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def matrix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    spec = importlib.util.spec_from_file_location("matrix", ROOT / "tools" / "matrix.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "matrix", module)
    spec.loader.exec_module(module)
    # the pass's log and pytest's basetemp go under tmp_path, not the checkout's build/
    monkeypatch.setattr(module, "BUILD", tmp_path / "build")
    monkeypatch.setattr(module, "LOGS", tmp_path / "build" / "parts")
    return module


def _one_test(folder: Path) -> Path:
    folder.mkdir()
    (folder / "test_one.py").write_text(
        "import pytest\n\n\n@pytest.mark.chosen\ndef test_one():\n    assert True\n"
    )
    (folder / "pytest.ini").write_text("[pytest]\nmarkers =\n    chosen: the one test\n")
    return folder


def test_a_pass_that_selects_nothing_fails(matrix, tmp_path: Path) -> None:
    folder = str(_one_test(tmp_path / "tier"))
    release = version("speculators")
    passed, summary = matrix.pytest_pass("tier", release, "cpu", "chosen", [], [folder])
    assert passed, summary  # the control: the same pass with a marker that matches
    assert "1 passed" in summary
    passed, summary = matrix.pytest_pass("tier", release, "cpu", "renamed", [], [folder])
    assert not passed, summary
    assert "no tests selected" in summary


def test_declared_empty_and_narrowed_runs_may_select_nothing(matrix, monkeypatch) -> None:
    code = matrix.NO_TESTS
    assert not matrix.verdict("tier", code, "5 deselected")[0]
    assert matrix.verdict("tier", code, "5 deselected", narrowed=True)[0]
    monkeypatch.setitem(matrix.EXPECTED_EMPTY, "tier", "no such tests yet")
    assert matrix.verdict("tier", code, "5 deselected")[0]
    assert not matrix.verdict("tier", 1, "1 failed")[0]


def test_a_full_run_writes_its_times_into_the_maintainers_guide(
    matrix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    guide = tmp_path / "maintainers.md"
    text = (ROOT / "docs" / "maintainers.md").read_text(encoding="utf-8")
    guide.write_text(text, encoding="utf-8")
    monkeypatch.setattr(matrix, "TIMES_DOC", guide)
    outcome = matrix.Outcome("pure", "test", True, "3 passed", started=0.0, ended=62.0)
    table = matrix.times_table([outcome], 62.0)
    matrix.record_times(table, "matrix: 3 passed, 0 failed")
    written = guide.read_text(encoding="utf-8")
    start, end = "<!-- matrix-times:start -->", "<!-- matrix-times:end -->"
    block = written[written.index(start) : written.index(end)]
    assert table in block and "`matrix: 3 passed, 0 failed`" in block
    assert "1m02s" in block
    # nothing outside the block changed
    assert written[: written.index(start)] == text[: text.index(start)]
    assert written[written.index(end) :] == text[text.index(end) :]
