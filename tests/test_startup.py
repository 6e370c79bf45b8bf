"""The .pth when things are half there, and the switch's syntax.

Each case is a fresh interpreter started with ``-I -S`` (no site-packages, no PYTHONPATH) that
then processes a folder holding the repository's ``.pth`` with ``site.addsitedir``, as start-up
does for site-packages: a package that is half uninstalled must cost no traceback, a venv
without wrapt must say once that the fixes are not active, and ``status`` must say why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import subprocess_env

import speculators_qwen_compat
from speculators_qwen_compat.core.startup import parse_switch

#: Release-independent: the .pth and the switch are read before speculators is imported (the
#: fresh interpreters never import it); run once (tools/matrix.py).
pytestmark = pytest.mark.pure

ROOT = Path(__file__).resolve().parents[1]
PTH = ROOT / "speculators_qwen_compat.pth"
PACKAGE = Path(speculators_qwen_compat.__file__).parent
PREFIX = "speculators_qwen_compat: "


def _isolated(site: Path, code: str, **env: str) -> subprocess.CompletedProcess:
    """A Python that sees only the standard library and ``site`` (processed like site-packages)."""
    prelude = f"import site; site.addsitedir({str(site)!r})\n"
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", prelude + code],
        capture_output=True,
        text=True,
        env=subprocess_env(**env),
        timeout=120,
    )


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
    result = _isolated(_site(tmp_path, package), "print('started')")
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
    code = (
        "import speculators\n"
        "from speculators_qwen_compat.__main__ import status_report\n"
        "import json; print(json.dumps(status_report()))\n"
    )
    result = _isolated(site, code)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{PREFIX}warning: fixes not active: wrapt is not installed")
    report = json.loads(result.stdout)
    assert report["activation"].startswith("failed: wrapt is not installed")
    assert report["patches"] and {p["state"] for p in report["patches"]} == {"failed"}
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


STATES = (
    "import json, speculators_qwen_compat as c\n"
    "from speculators_qwen_compat.core import startup\n"
    "startup.settle()\n"
    "print(json.dumps({s.name: s.state for s in c.status(resolve=False)}))\n"
)


@pytest.mark.parametrize(
    ("value", "disabled", "message"),
    [
        ("off:row_guard,run_report", {"row_guard", "run_report"}, None),
        ("of", set(), "warning: SPECULATORS_QWEN_COMPAT='of' is not on, off, 1, 0 or off:FIX"),
        ("conversations", set(), "warning: SPECULATORS_QWEN_COMPAT='conversations' is not"),
        ("off:row_guard,nosuch", {"row_guard"}, "warning: no fix named nosuch to switch off"),
    ],
)
def test_switch_in_a_fresh_interpreter(value: str, disabled: set[str], message: str | None) -> None:
    result = subprocess.run(
        [sys.executable, "-c", STATES],
        capture_output=True,
        text=True,
        env=subprocess_env(SPECULATORS_QWEN_COMPAT=value),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    states = json.loads(result.stdout)
    assert {name for name, state in states.items() if state == "disabled"} == disabled
    assert "inactive" not in states.values()
    if message is None:
        assert result.stderr == ""
    else:
        assert result.stderr.count("\n") == 1, result.stderr
        assert result.stderr.startswith(PREFIX + message)


def test_switched_off_stays_idle() -> None:
    result = subprocess.run(
        [sys.executable, "-c", STATES],
        capture_output=True,
        text=True,
        env=subprocess_env(SPECULATORS_QWEN_COMPAT="off"),
        timeout=120,
    )
    assert result.returncode == 0 and result.stderr == ""
    assert set(json.loads(result.stdout).values()) == {"inactive"}
