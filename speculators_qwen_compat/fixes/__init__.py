"""One module per fix, in the order they are applied. Where a row goes through upstream, and
which fixes wrap each function in which order, is declared in route.py: a function several
fixes wrap is wrapped once, its stages in route.py's order whatever the order here."""

from speculators_qwen_compat.fixes.data.bounded_output import BoundedOutputFix
from speculators_qwen_compat.fixes.data.conversations import ConversationsFix
from speculators_qwen_compat.fixes.data.forked_tokenizer import ForkedTokenizerFix
from speculators_qwen_compat.fixes.data.local_render import LocalRenderFix
from speculators_qwen_compat.fixes.data.mask_probe import MaskProbeFix
from speculators_qwen_compat.fixes.data.messages_json import MessagesJsonFix
from speculators_qwen_compat.fixes.data.offsets_loss_mask import OffsetsLossMaskFix
from speculators_qwen_compat.fixes.data.overwrite_guard import OverwriteGuardFix
from speculators_qwen_compat.fixes.data.row_guard import RowGuardFix
from speculators_qwen_compat.fixes.data.row_tensors import RowTensorsFix
from speculators_qwen_compat.fixes.data.run_report import RunReportFix
from speculators_qwen_compat.fixes.data.token_frequency import TokenFrequencyFix
from speculators_qwen_compat.fixes.regenerate.regen_replies import RegenRepliesFix
from speculators_qwen_compat.fixes.regenerate.regen_run import RegenRunFix
from speculators_qwen_compat.fixes.regenerate.regen_turns import RegenTurnsFix
from speculators_qwen_compat.fixes.training.mask_token import MaskTokenFix
from speculators_qwen_compat.fixes.training.sample_drops import SampleDropsFix
from speculators_qwen_compat.fixes.training.served_attention import ServedAttentionFix
from speculators_qwen_compat.fixes.training.served_rope import ServedRopeFix
from speculators_qwen_compat.fixes.training.verifier_norm import VerifierNormFix

ALL_FIXES = (
    MaskProbeFix,
    OffsetsLossMaskFix,
    RowGuardFix,
    ConversationsFix,
    MessagesJsonFix,
    LocalRenderFix,
    RowTensorsFix,
    ForkedTokenizerFix,
    TokenFrequencyFix,
    RunReportFix,
    BoundedOutputFix,
    OverwriteGuardFix,
    RegenTurnsFix,
    RegenRepliesFix,
    RegenRunFix,
    VerifierNormFix,
    MaskTokenFix,
    SampleDropsFix,
    ServedRopeFix,
    ServedAttentionFix,
)

__all__ = ["ALL_FIXES"]
