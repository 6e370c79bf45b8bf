"""Fix: upstream's ``--overwrite`` guard accepts an output folder holding our compat_report.json.

Target: ``cli.prepare_data.PREPARE_DATA_OVERWRITE_ALLOWED_FILES`` (0.8+): without the name a second
``--overwrite`` run refuses the first run's folder (docs/upstream.md, "Overwrite guard"). <= 0.7
keep the guard in the git-only script, which our entry point replaces.
"""

from __future__ import annotations

from speculators_qwen_compat.core.fix import Fix, Patcher
from speculators_qwen_compat.core.targets import SET, ReleaseRange, Resolved, Shape, Target
from speculators_qwen_compat.core.upstream import CLI_PREPARE_DATA
from speculators_qwen_compat.data.account.ledger import REPORT_NAME

ALLOWED = Target(CLI_PREPARE_DATA, "PREPARE_DATA_OVERWRITE_ALLOWED_FILES", kind=SET)


class OverwriteGuardFix(Fix):
    name = "overwrite_guard"
    summary = f"let upstream's --overwrite guard accept {REPORT_NAME}"
    modules = (CLI_PREPARE_DATA,)
    shapes = (Shape(f"{REPORT_NAME} added", (ALLOWED,)),)
    applies_on = ReleaseRange("0.8.1", "0.9.0")

    def apply(self, found: Resolved, patcher: Patcher) -> None:
        patcher.replace(
            *found.owner_and_name(ALLOWED), frozenset(found.get(ALLOWED)) | {REPORT_NAME}
        )
