"""One module per fix. The order here is the order they are applied: fixes that wrap the same
upstream function nest in it (the later one outside)."""

from speculators_qwen_compat.fixes.conversations import ConversationsFix
from speculators_qwen_compat.fixes.local_render import LocalRenderFix
from speculators_qwen_compat.fixes.mask_probe import MaskProbeFix
from speculators_qwen_compat.fixes.overwrite_guard import OverwriteGuardFix
from speculators_qwen_compat.fixes.row_guard import RowGuardFix
from speculators_qwen_compat.fixes.run_report import RunReportFix

ALL_FIXES = (
    MaskProbeFix,
    RowGuardFix,  # inside: splits a batch into rows
    ConversationsFix,  # outside: reads and normalises the batch, drops unreadable rows
    LocalRenderFix,
    RunReportFix,
    OverwriteGuardFix,
)

__all__ = ["ALL_FIXES"]
