"""run and train execute someone else's code: what it raises propagates as Python shows it
(traceback, exit code kept); only our own problems are one line, and the hint names what the
entry point accepts (neither parses --debug)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import last_line, program, subprocess_env

#: Release-independent: the target is always named (a script), so the release's trainer is
#: never looked up; run once (tools/matrix.py). test_drop_in.py finds each release's trainer.
pytestmark = pytest.mark.pure

PREFIX = "speculators_qwen_compat: error: "


def _entry(name: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", f"speculators_qwen_compat.{name}", *args],
        capture_output=True,
        text=True,
        env=subprocess_env(**env),
        timeout=300,
    )


def _target(name: str, script: Path) -> list[str]:
    return ["--script", str(script)] if name == "train" else [str(script)]


@pytest.mark.parametrize("name", ["run", "train"])
def test_the_targets_exception_keeps_its_traceback(name: str) -> None:
    script = program("raises_in_inner")
    result = _entry(name, *_target(name, script))
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert f'File "{script}"' in result.stderr and "in inner" in result.stderr
    assert last_line(result.stderr) == "ValueError: boom from the user"
    assert PREFIX not in result.stderr


@pytest.mark.parametrize("name", ["run", "train"])
def test_the_targets_exit_code_is_kept(name: str) -> None:
    script = program("exits_seven")
    assert _entry(name, *_target(name, script)).returncode == 7


@pytest.mark.parametrize("name", ["run", "train"])
def test_our_own_errors_are_one_line_without_a_flag_it_does_not_parse(
    name: str, tmp_path: Path
) -> None:
    missing = tmp_path / "missing.py"
    result = _entry(name, *_target(name, missing))
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(PREFIX) and str(missing) in result.stderr
    assert "--debug" not in result.stderr
