"""Fix: one conversation the template rejects is skipped and counted, never the end of the run.

Why: <= 0.6 let a ``TemplateError`` kill the map, later releases drop it uncounted
(docs/upstream.md, "Row errors"). Targets: ``_preprocess_batch`` (<= 0.7), 0.8+'s
``_render_conversation_rows``/``_render_boundary_rows``, ``_passthrough_pretokenized``.
"""

from __future__ import annotations

from speculators_qwen_compat.core.fix import Patcher
from speculators_qwen_compat.core.targets import (
    ReleaseRange,
    Resolved,
    Shape,
    Target,
    present,
)
from speculators_qwen_compat.core.upstream import PREPROCESSING
from speculators_qwen_compat.data.account.rows import FoldRowErrors
from speculators_qwen_compat.route.declaration import RouteFix

BATCH = Target(PREPROCESSING, "_preprocess_batch", params=("examples",))
SCRIPT_BATCH = Target(
    PREPROCESSING, "_preprocess_batch", params=("examples", "tokenizer|processor", "max_length")
)
OFFSETS = Target(
    PREPROCESSING,
    "_create_loss_mask_from_offsets",
    params=("text", "offsets", "assistant_pattern"),
    optional=True,
)
RENDER_ROWS = Target(
    PREPROCESSING, "_render_conversation_rows", params=("conv", "idx", "max_length")
)
BOUNDARY_ROWS = Target(PREPROCESSING, "_render_boundary_rows")
#: 0.7+: speculator-format rows (input_ids + loss_mask) are passed through here, uncounted.
PASSTHROUGH = Target(
    PREPROCESSING,
    "_passthrough_pretokenized",
    params=("examples", "max_length", "minimum_valid_tokens"),
    optional=True,
)
#: 0.8+: one row per assistant turn, guarded per conversation; <= 0.7: per row of the batch.
RENDER_GENERATION = Shape(
    "_render_conversation_rows guarded per conversation",
    (BATCH, RENDER_ROWS, BOUNDARY_ROWS, PASSTHROUGH),
    when=(present(PREPROCESSING, RENDER_ROWS.path),),
)
SCRIPT_GENERATION = Shape("_preprocess_batch guarded per row", (SCRIPT_BATCH, OFFSETS, PASSTHROUGH))


class RowGuardFix(RouteFix):
    name = "row_guard"
    summary = "skip and count a conversation the template or the normaliser rejects"
    modules = (PREPROCESSING,)
    shapes = (RENDER_GENERATION, SCRIPT_GENERATION)
    applies_on = ReleaseRange("0.5.0", "0.9.0")

    def apply(self, found: Resolved, patcher: Patcher) -> None:
        import logging

        module_name = found.module_name  # upstream's preprocessing module logs per-row errors
        upstream_log = logging.getLogger(module_name)
        patcher.replace(upstream_log, "filters", [*upstream_log.filters, FoldRowErrors()])
        super().apply(found, patcher)
