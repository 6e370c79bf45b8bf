"""The .pth when things are half there, and the switch's syntax.

Each case is a fresh interpreter started with ``-I -S`` (no site-packages, no PYTHONPATH) that
then processes a folder holding the repository's ``.pth`` with ``site.addsitedir``, as start-up
does for site-packages: a package that is half uninstalled must cost no traceback, a venv
without wrapt must say once that the fixes are not active, and ``status`` must say why."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import run_program

import speculators_qwen_compat
from speculators_qwen_compat.core.fix import FixState
from speculators_qwen_compat.core.startup import ENV_SWITCH, PREFIX, parse_switch

#: Release-independent: the .pth and the switch are read before speculators is imported (the
#: fresh interpreters never import it); run once (tools/matrix.py).
pytestmark = pytest.mark.pure

ROOT = Path(__file__).resolve().parents[1]
PTH = ROOT / "speculators_qwen_compat.pth"
PACKAGE = Path(speculators_qwen_compat.__file__).parent


def _isolated(site: Path, what: str) -> subprocess.CompletedProcess:
    """A Python that sees only the standard library and ``site`` (processed like site-packages),
    running programs/isolated_start.py's ``what``."""
    return run_program("isolated_start", str(site), what, flags=("-I", "-S"))


def _site(tmp_path: Path, package: str) -> Path:
    site = tmp_path / "site-packages"
    site.mkdir()
    (site / PTH.name).write_text(PTH.read_text())
    if package == "whole":
        os.symlink(PACKAGE, site / PACKAGE.name)
    elif package == "init only":
        (site / PACKAGE.name).mkdir()
        (site / PACKAGE.name / "__init__.py").write_text((PACKAGE / "__init__.py").read_text())
    return site


@pytest.mark.parametrize("package", ["gone", "init only"])
def test_half_uninstalled_package_starts_clean(tmp_path: Path, package: str) -> None:
    result = _isolated(_site(tmp_path, package), "started")
    assert result.returncode == 0
    assert result.stdout == "started\n"
    assert result.stderr == ""


def test_without_wrapt_one_line_and_status_says_why(tmp_path: Path) -> None:
    site = _site(tmp_path, "whole")
    (site / "speculators").mkdir()
    (site / "speculators" / "__init__.py").write_text("")
    dist = site / "speculators-0.9.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: speculators\nVersion: 0.9.0\n")
    result = _isolated(site, "status")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{PREFIX}warning: fixes not active: wrapt is not installed")
    report = json.loads(result.stdout)
    assert report["activation"].startswith("failed: wrapt is not installed")
    assert report["patches"] and {p["state"] for p in report["patches"]} == {FixState.FAILED}
    assert all("activation failed: wrapt" in p["reason"] for p in report["patches"])


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", (False, set())),
        ("on", (False, set())),
        ("1", (False, set())),
        ("OFF", (True, set())),
        ("0", (True, set())),
        ("off:row_guard", (False, {"row_guard"})),
        ("off: row_guard , run_report", (False, {"row_guard", "run_report"})),
    ],
)
def test_switch_values(value: str, expected: tuple[bool, set[str]]) -> None:
    assert parse_switch(value) == expected


@pytest.mark.parametrize("value", ["of", "conversations", "-row_guard", "off:", "off:a,,b", "yes"])
def test_malformed_switch_is_rejected(value: str) -> None:
    with pytest.raises(ValueError, match="is not on, off, 1, 0 or off:FIX,FIX"):
        parse_switch(value)


@pytest.mark.parametrize(
    ("value", "disabled", "message"),
    [
        ("off:row_guard,run_report", {"row_guard", "run_report"}, None),
        ("of", set(), f"warning: {ENV_SWITCH}='of' is not on, off, 1, 0 or off:FIX"),
        ("conversations", set(), f"warning: {ENV_SWITCH}='conversations' is not"),
        ("off:row_guard,nosuch", {"row_guard"}, "warning: no fix named nosuch to switch off"),
    ],
)
def test_switch_in_a_fresh_interpreter(value: str, disabled: set[str], message: str | None) -> None:
    result = run_program("fix_states", "--settled", **{ENV_SWITCH: value})
    assert result.returncode == 0, result.stderr
    states = json.loads(result.stdout)
    assert {name for name, state in states.items() if state == FixState.DISABLED} == disabled
    assert "inactive" not in states.values()
    if message is None:
        assert result.stderr == ""
    else:
        assert result.stderr.count("\n") == 1, result.stderr
        assert result.stderr.startswith(PREFIX + message)


def test_switched_off_stays_idle() -> None:
    result = run_program("fix_states", "--settled", **{ENV_SWITCH: "off"})
    assert result.returncode == 0 and result.stderr == ""
    assert set(json.loads(result.stdout).values()) == {"inactive"}
