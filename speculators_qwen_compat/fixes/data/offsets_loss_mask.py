"""Fix (speed): the loss mask of a pattern-masked row marked per assistant span, not per token.

Target: ``_create_loss_mask_from_offsets`` (<= 0.7), one torch write per token (docs/upstream.md,
"Loss masks from offsets"; cost: docs/maintainers.md, "Speed"). Each span is marked with numpy:
the same bool tensor (data/render/offsets_mask.py); other rows go to upstream's function.
"""

from __future__ import annotations

from dataclasses import replace

from speculators_qwen_compat.core.fix import not_needed
from speculators_qwen_compat.core.targets import ReleaseRange, Shape, present
from speculators_qwen_compat.core.upstream import PREPROCESSING
from speculators_qwen_compat.fixes.data import row_guard
from speculators_qwen_compat.route.declaration import RouteFix

#: the target row_guard also wraps (optionally, for weight-0 turns); required here
OFFSETS = replace(row_guard.OFFSETS, optional=False)


class OffsetsLossMaskFix(RouteFix):
    name = "offsets_loss_mask"
    summary = "mark pattern loss masks a span at a time with numpy (same mask, less CPU)"
    modules = (PREPROCESSING,)
    shapes = (
        Shape(
            "loss masks from offsets marked per span",
            (OFFSETS,),
            when=(present(PREPROCESSING, OFFSETS.path),),
        ),
    )
    otherwise = not_needed("loss masks come from render boundaries, not character offsets")
    applies_on = ReleaseRange("0.5.0", "0.7.0.2")
