"""Fix (speed): the loss mask of a pattern-masked row marked per assistant span, not per token.

Target: ``_create_loss_mask_from_offsets`` (<= 0.7), one torch write per token (docs/upstream.md,
"Loss masks from offsets"; cost: docs/maintainers.md, "Speed"). Each span is marked with numpy:
the same bool tensor; unsorted offsets and rows with no match go to upstream's function.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from speculators_qwen_compat.core.fix import Fix, Patcher, not_needed
from speculators_qwen_compat.core.targets import Found, ReleaseRange, Shape, present
from speculators_qwen_compat.core.upstream import PREPROCESSING, bind
from speculators_qwen_compat.fixes import route
from speculators_qwen_compat.fixes.data import row_guard

#: the target row_guard also wraps (optionally, for weight-0 turns); required here
OFFSETS = replace(row_guard.OFFSETS, optional=False)


class OffsetsLossMaskFix(Fix):
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

    def apply(self, found: Found, patcher: Patcher) -> None:
        def create(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            arguments = bind(wrapped, args, kwargs).arguments
            try:
                mask = loss_mask(
                    arguments["text"], arguments["offsets"], arguments["assistant_pattern"]
                )
            except Exception:  # upstream's own function then raises (or answers) as it does
                mask = None
            return wrapped(*args, **kwargs) if mask is None else mask

        route.wrap(found, patcher, OFFSETS, self.name, create)


def loss_mask(text: str, offsets: Any, pattern: str | re.Pattern[str]) -> Any:
    """Upstream's mask as a torch bool tensor, or None where upstream's own function must run
    (no match, token starts out of order, offsets that are not (start, end) pairs)."""
    import numpy
    import torch

    spans = [match.span(1) for match in re.finditer(pattern, text, re.DOTALL)]
    if not spans:
        return None
    pairs = numpy.asarray(offsets, dtype=numpy.int64)
    if pairs.ndim != 2 or pairs.shape[1:] != (2,):
        return None if len(offsets) else torch.zeros(0, dtype=torch.bool)
    starts, ends = pairs[:, 0], pairs[:, 1]
    if (starts[1:] < starts[:-1]).any():
        return None  # bisect on unsorted starts: only upstream's own walk gives its answer
    mask = numpy.zeros(len(pairs), dtype=numpy.bool_)
    for span_start, span_end in spans:
        first = max(0, int(numpy.searchsorted(starts, span_start, "left")) - 1)
        stop = max(first, int(numpy.searchsorted(starts, span_end, "left")))
        mask[first:stop] |= ends[first:stop] > span_start
    return torch.from_numpy(mask)
