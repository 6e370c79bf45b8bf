"""One module per fix. The order here is the order they are applied: fixes that wrap the same
upstream function nest in it (the later one outside)."""

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
    OffsetsLossMaskFix,  # inside row_guard's wrapper, which unsets weight-0 turns in its mask
    RowGuardFix,  # inside: splits a batch into rows
    ConversationsFix,  # outside: reads and normalises the batch, drops unreadable rows
    MessagesJsonFix,  # outermost: the batch handed to datasets, messages typed once
    LocalRenderFix,
    RowTensorsFix,
    ForkedTokenizerFix,
    TokenFrequencyFix,  # inside run_report's wrapper: a refused run writes no count
    RunReportFix,
    BoundedOutputFix,
    OverwriteGuardFix,
    RegenTurnsFix,
    RegenRepliesFix,
    RegenRunFix,
    VerifierNormFix,
    MaskTokenFix,
    SampleDropsFix,
    ServedRopeFix,  # both wrap save_pretrained: the config is set while upstream writes it
    ServedAttentionFix,
)

__all__ = ["ALL_FIXES"]
