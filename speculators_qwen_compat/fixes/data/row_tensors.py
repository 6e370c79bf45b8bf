"""Fix (speed): each kept row's two tensors built from int64 arrays, not element by element.

Target: ``_append_row`` (0.8+), whose ``torch.tensor(list)`` reads one element at a time
(docs/upstream.md, "Row tensors"; cost: docs/maintainers.md, "Speed"). The same answers and int64
tensors through numpy (data/render/row_tensors.py); other rows go to upstream's function.
"""

from __future__ import annotations

from speculators_qwen_compat.core.fix import not_needed
from speculators_qwen_compat.core.targets import ReleaseRange, Shape, Target, present
from speculators_qwen_compat.core.upstream import PREPROCESSING
from speculators_qwen_compat.route.declaration import RouteFix

APPEND_ROW = Target(
    PREPROCESSING,
    "_append_row",
    params=("results", "input_ids", "loss_mask", "max_length", "minimum_valid_tokens"),
)


class RowTensorsFix(RouteFix):
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
