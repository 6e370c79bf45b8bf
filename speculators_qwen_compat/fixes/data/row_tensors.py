"""Fix (speed): each kept row's two tensors built from int64 arrays, not element by element.

Target: ``_append_row`` (0.8+), whose ``torch.tensor(list)`` reads one element at a time
(docs/upstream.md, "Row tensors"; cost: docs/maintainers.md, "Speed"). The same answers and int64
tensors through numpy; anything but flat lists of Python ints goes to upstream's function.
"""

from __future__ import annotations

from typing import Any

from speculators_qwen_compat.core.fix import Fix, Patcher, not_needed
from speculators_qwen_compat.core.targets import Found, ReleaseRange, Shape, Target, present
from speculators_qwen_compat.core.upstream import PREPROCESSING, bind

APPEND_ROW = Target(
    PREPROCESSING,
    "_append_row",
    params=("results", "input_ids", "loss_mask", "max_length", "minimum_valid_tokens"),
)
KEPT, UNSUPERVISED, FILTERED = "kept", "unsupervised", "filtered"


class RowTensorsFix(Fix):
    name = "row_tensors"
    summary = "tensorize each kept row through numpy (same int64 tensors, less CPU)"
    modules = (PREPROCESSING,)
    shapes = (
        Shape(
            "rows tensorized through numpy",
            (APPEND_ROW,),
            when=(present(PREPROCESSING, APPEND_ROW.path),),
        ),
    )
    otherwise = not_needed("rows are tensorized elsewhere (0.5-0.7: by the tokenizer)")
    applies_on = ReleaseRange("0.8.1", "0.9.0")

    def apply(self, found: Found, patcher: Patcher) -> None:
        def append_row(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            arguments = bind(wrapped, args, kwargs).arguments
            answer = append_through_numpy(**arguments)
            return wrapped(*args, **kwargs) if answer is None else answer

        patcher.wrap(*found.owner_and_name(APPEND_ROW), append_row)


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
