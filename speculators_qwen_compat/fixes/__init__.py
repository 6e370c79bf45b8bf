"""The fixes, in the order they are applied, each as "package.module:ClassName": nothing of a
fix is imported before a module it targets is (core/fix.py ``FixEntry``). Where a row goes through
upstream, and which fixes wrap each function in which order, is declared in route/: a function
several fixes wrap is wrapped once, its stages in the route's order whatever the order here."""

from speculators_qwen_compat.core.fix import FixEntry
from speculators_qwen_compat.core.upstream import (
    CLI_PREPARE_DATA,
    CLI_REGENERATE,
    PREPROCESSING,
    SPECULATOR_MODEL,
    TRAIN_CLI,
    TRAIN_DATA,
    TRAIN_RECOVERY,
    TRAIN_UTILS,
    TRAINER,
)

_DATA = "speculators_qwen_compat.fixes.data"
_REGENERATE = "speculators_qwen_compat.fixes.regenerate"
_TRAINING = "speculators_qwen_compat.fixes.training"

#: Name, the upstream modules whose import applies the fix (the first decides its state), and
#: its class; the class declares the same name and modules (checked when it is imported).
ALL_FIXES: tuple[FixEntry, ...] = (
    FixEntry("mask_probe", (PREPROCESSING,), f"{_DATA}.mask_probe:MaskProbeFix"),
    FixEntry(
        "offsets_loss_mask", (PREPROCESSING,), f"{_DATA}.offsets_loss_mask:OffsetsLossMaskFix"
    ),
    FixEntry("row_guard", (PREPROCESSING,), f"{_DATA}.row_guard:RowGuardFix"),
    FixEntry("conversations", (PREPROCESSING,), f"{_DATA}.conversations:ConversationsFix"),
    FixEntry("messages_json", (PREPROCESSING,), f"{_DATA}.messages_json:MessagesJsonFix"),
    FixEntry("local_render", (PREPROCESSING,), f"{_DATA}.local_render:LocalRenderFix"),
    FixEntry("row_tensors", (PREPROCESSING,), f"{_DATA}.row_tensors:RowTensorsFix"),
    FixEntry("forked_tokenizer", (PREPROCESSING,), f"{_DATA}.forked_tokenizer:ForkedTokenizerFix"),
    FixEntry("token_frequency", (PREPROCESSING,), f"{_DATA}.token_frequency:TokenFrequencyFix"),
    FixEntry("run_report", (PREPROCESSING, CLI_PREPARE_DATA), f"{_DATA}.run_report:RunReportFix"),
    FixEntry("bounded_output", (PREPROCESSING,), f"{_DATA}.bounded_output:BoundedOutputFix"),
    FixEntry("overwrite_guard", (CLI_PREPARE_DATA,), f"{_DATA}.overwrite_guard:OverwriteGuardFix"),
    FixEntry("regen_turns", (CLI_REGENERATE,), f"{_REGENERATE}.regen_turns:RegenTurnsFix"),
    FixEntry("regen_replies", (CLI_REGENERATE,), f"{_REGENERATE}.regen_replies:RegenRepliesFix"),
    FixEntry("regen_run", (CLI_REGENERATE,), f"{_REGENERATE}.regen_run:RegenRunFix"),
    FixEntry("verifier_norm", (SPECULATOR_MODEL,), f"{_TRAINING}.verifier_norm:VerifierNormFix"),
    FixEntry("mask_token", (TRAIN_UTILS,), f"{_TRAINING}.mask_token:MaskTokenFix"),
    FixEntry(
        "sample_drops",
        (TRAINER, TRAIN_RECOVERY, TRAIN_DATA),
        f"{_TRAINING}.sample_drops:SampleDropsFix",
    ),
    FixEntry("served_rope", (SPECULATOR_MODEL,), f"{_TRAINING}.served_rope:ServedRopeFix"),
    FixEntry(
        "served_attention",
        (SPECULATOR_MODEL, TRAINER),
        f"{_TRAINING}.served_attention:ServedAttentionFix",
    ),
    FixEntry(
        "trained_record",
        (SPECULATOR_MODEL, TRAINER),
        f"{_TRAINING}.trained_record:TrainedRecordFix",
    ),
    FixEntry("fine_tune_dtype", (TRAIN_CLI,), f"{_TRAINING}.fine_tune_dtype:FineTuneDtypeFix"),
)

__all__ = ["ALL_FIXES"]
