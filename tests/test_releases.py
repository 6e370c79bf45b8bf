"""The release table: the README's support table is generated from it and up to date."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from speculators_qwen_compat.core.releases import TESTED_RELEASES
from speculators_qwen_compat.fixes import ALL_FIXES

pytestmark = pytest.mark.pure  # release-independent: run once (tools/matrix.py)

ROOT = Path(__file__).resolve().parents[1]


def test_every_release_declares_every_fix() -> None:
    names = {fix.name for fix in ALL_FIXES}
    for release in TESTED_RELEASES.values():
        assert set(release.fixes) == names, release.version


def test_every_release_has_a_venv_recipe() -> None:
    for version in TESTED_RELEASES:
        assert (ROOT / "envs" / f"{version}.txt").is_file(), version


def test_readme_support_table_is_current() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "support_table.py"), "--check"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout
