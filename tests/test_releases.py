"""The release table: docs/maintainers.md's support table is generated from it and up to date."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from speculators_qwen_compat.core.fix import FixState
from speculators_qwen_compat.core.releases import TESTED_RELEASES
from speculators_qwen_compat.fixes import ALL_FIXES

pytestmark = pytest.mark.pure  # release-independent: run once (tools/matrix.py)

ROOT = Path(__file__).resolve().parents[1]


def test_every_release_declares_every_fix() -> None:
    names = {fix.name for fix in ALL_FIXES}
    for release in TESTED_RELEASES.values():
        assert set(release.fixes) == names, release.version


def test_each_fix_applies_on_the_releases_it_declares() -> None:
    """A fix's declared span (shown by status) and the table agree: applied exactly on the
    tested releases inside the span."""
    for entry in ALL_FIXES:
        fix = entry.load()
        assert fix.applies_on is not None, fix.name
        applied = {v for v, r in TESTED_RELEASES.items() if r.fixes[fix.name] == FixState.APPLIED}
        inside = {v for v in TESTED_RELEASES if v in fix.applies_on}
        assert applied == inside, (fix.name, str(fix.applies_on))


def test_every_release_has_an_environment_pinning_it() -> None:
    """Each tested release has its folder in envs/environments.toml, installing that very
    speculators (a release added to the table without one would test nothing)."""
    table = tomllib.loads((ROOT / "envs" / "environments.toml").read_text(encoding="utf-8"))
    for version in TESTED_RELEASES:
        recipe = table["env"].get(f"rel/{version}")
        assert recipe is not None, version
        assert f"speculators=={version}" in recipe["no_deps"], (version, recipe)


def test_support_table_is_current() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "support_table.py"), "--check"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout
