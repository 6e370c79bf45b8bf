"""A pattern-masked row's loss mask marked per assistant span with numpy, not per token (<= 0.7).

Upstream's ``_create_loss_mask_from_offsets`` writes one torch element per token (docs/upstream.md,
"Loss masks from offsets"); this gives the same bool tensor, or None where upstream's own walk
must answer (unsorted offsets, no match)."""

from __future__ import annotations

import re
from typing import Any


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
