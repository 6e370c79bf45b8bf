"""A kept row's two tensors built from int64 arrays, not element by element (0.8+).

Upstream's ``_append_row`` makes them with ``torch.tensor(list)`` (docs/upstream.md, "Row tensors");
this gives upstream's answer and the same int64 tensors through numpy, or None where upstream's
own function must run (anything but flat lists of Python ints)."""

from __future__ import annotations

from typing import Any

KEPT, UNSUPERVISED, FILTERED = "kept", "unsupervised", "filtered"


def append_through_numpy(
    results: dict[str, list[Any]],
    input_ids: Any,
    loss_mask: Any,
    max_length: int,
    minimum_valid_tokens: int | None,
) -> str | None:
    """Upstream's answer for this row, with the same entries appended to ``results``; None
    (nothing appended) where upstream's own function must run."""
    import numpy
    import torch

    if type(input_ids) is not list or type(loss_mask) is not list:
        return None
    ids, mask = input_ids[:max_length], loss_mask[:max_length]
    try:
        supervised = sum(mask)  # upstream's own count, in Python (no int64 overflow)
    except Exception:  # upstream's own function then raises as it does
        return None
    if supervised == 0:
        return UNSUPERVISED
    if minimum_valid_tokens is not None and supervised < minimum_valid_tokens:
        return FILTERED
    id_array, mask_array = numpy.array(ids), numpy.array(mask)
    for array in (id_array, mask_array):
        if array.dtype != numpy.int64 or array.ndim != 1:
            return None  # not a flat list of Python ints in int64's range
    results["input_ids"].append(torch.from_numpy(id_array))
    results["loss_mask"].append(torch.from_numpy(mask_array))
    results["seq_len"].append(len(ids))
    return KEPT
