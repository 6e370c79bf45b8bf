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


def test_every_release_expects_every_fix() -> None:
    names = [fix.name for fix in ALL_FIXES]
    for release in TESTED_RELEASES.values():
        assert list(release.fixes) == names, release.version  # in the order status lists them


def test_each_fix_declares_the_tested_releases_it_applies_on() -> None:
    """A fix's span (shown by status) runs from one tested release to another, and outside it
    the fix says why it is not applied: not-needed, or not-applicable where the shape differs."""
    for entry in ALL_FIXES:
        fix = entry.load()
        assert fix.applies_on is not None, fix.name
        assert {fix.applies_on.first, fix.applies_on.last} <= set(TESTED_RELEASES), fix.name
        outside = (FixState.NOT_NEEDED, FixState.NOT_APPLICABLE)
        assert fix.outside_range in outside, fix.name
        if fix.otherwise.state == FixState.NOT_NEEDED:  # what status says where no shape fits
            assert fix.outside_range == FixState.NOT_NEEDED, fix.name


def test_each_fix_applies_on_the_releases_it_declares() -> None:
    """The table says applied exactly on the tested releases inside a fix's span, and the fix's
    ``outside_range`` elsewhere (tests/test_activation.py: status says the same)."""
    for entry in ALL_FIXES:
        fix = entry.load()
        for version, release in TESTED_RELEASES.items():
            inside = version in fix.applies_on
            expected = FixState.APPLIED if inside else fix.outside_range
            assert release.fixes[fix.name] == expected, (fix.name, version)


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
