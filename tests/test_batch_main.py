"""conftest.run_batch runs several entry points in one interpreter (programs/batch_main.py):
each case must find the process as a fresh interpreter has it, whatever the case before it
left behind (the package's run state, the environment, the working directory, warnings)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import run_batch
from programs.state_probe import VARIABLE, WARNING

#: The package's run state only (no release involved): run once (tools/matrix.py).
pytestmark = pytest.mark.pure


def test_a_case_starts_as_a_fresh_interpreter(tmp_path: Path) -> None:
    probe = "state_probe"  # beside batch_main.py, importable by its name there
    cases = {"dirty": ["dirty"], "look": ["look"]}
    results = run_batch(tmp_path / "logs", cases, {name: probe for name in cases})
    assert results["dirty"].returncode == 0, results["dirty"].stderr
    look = results["look"]
    assert look.returncode == 0, look.stderr
    assert json.loads(look.stdout) == {
        "run": None,
        "batch": None,
        "reason_logged": True,
        "env": None,
        "cwd": os.getcwd(),
    }
    assert VARIABLE not in os.environ
    assert WARNING in look.stderr
