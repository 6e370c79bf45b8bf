"""Fix: upstream's ``--overwrite`` guard accepts an output folder holding our compat_report.json.

Target: ``speculators.cli.prepare_data.PREPARE_DATA_OVERWRITE_ALLOWED_FILES`` (0.8+), the set of
file names ``assert_safe_to_overwrite`` may delete besides ``*.arrow``. Without the report's name
in it, a second ``--overwrite`` run refuses the folder the first run wrote. <= 0.7 keep the guard
in the git-only script, which our prepare_data entry point replaces (see prepare_data.py).
Shape needed: that name bound to a set of strings.
"""

from __future__ import annotations

from types import ModuleType

from speculators_qwen_compat.core.fix import (
    Fits,
    Fix,
    Patcher,
    applies,
    not_applicable,
)
from speculators_qwen_compat.core.upstream import CLI_PREPARE_DATA

REPORT_NAME = "compat_report.json"
ALLOWED = "PREPARE_DATA_OVERWRITE_ALLOWED_FILES"


class OverwriteGuardFix(Fix):
    name = "overwrite_guard"
    summary = "let upstream's --overwrite guard accept compat_report.json"
    modules = (CLI_PREPARE_DATA,)

    def fits(self, module_name: str, module: ModuleType) -> Fits:
        allowed = getattr(module, ALLOWED, None)
        if not isinstance(allowed, (set, frozenset)):
            return not_applicable(f"{module_name}.{ALLOWED} is not a set")
        return applies(f"{REPORT_NAME} added to {ALLOWED}")

    def apply(self, module_name: str, module: ModuleType, patcher: Patcher) -> None:
        patcher.replace(module, ALLOWED, frozenset(getattr(module, ALLOWED)) | {REPORT_NAME})
