"""Fix (speed): upstream's token-frequency count in Arrow batches instead of one row at a time.

Target: ``save_token_frequency_distribution`` as preprocessing binds it (docs/upstream.md, "Token
frequencies"; cost: docs/maintainers.md, "Speed"). Counted with numpy, saved as the same dict in
the same insertion order; an existing file or other data goes to upstream's function.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from speculators_qwen_compat.core.fix import Fix, Patcher
from speculators_qwen_compat.core.targets import Found, ReleaseRange, Shape, Target
from speculators_qwen_compat.core.upstream import PREPROCESSING, bind
from speculators_qwen_compat.fixes import route

COUNTER = Target(
    PREPROCESSING, "save_token_frequency_distribution", params=("dataset", "output_path")
)
COLUMNS = ("input_ids", "loss_mask")
BATCH_ROWS = 2048


class TokenFrequencyFix(Fix):
    name = "token_frequency"
    summary = "count the token-frequency file over Arrow batches (same file, a fraction of the CPU)"
    modules = (PREPROCESSING,)
    shapes = (Shape("counted over Arrow batches", (COUNTER,)),)
    applies_on = ReleaseRange("0.5.0", "0.9.0")

    def apply(self, found: Found, patcher: Patcher) -> None:
        def save(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            arguments = bind(wrapped, args, kwargs).arguments
            dataset, path = arguments["dataset"], Path(arguments["output_path"])
            counts = None if path.exists() else token_frequencies(dataset)
            if counts is None:
                return wrapped(*args, **kwargs)
            import torch

            path.parent.mkdir(parents=True, exist_ok=True)
            torch.save(counts, path)
            return None

        route.wrap(found, patcher, COUNTER, self.name, save)


def token_frequencies(dataset: Any) -> dict[int, int] | None:
    """Supervised token id -> count over every row, in upstream's insertion order; None when
    the dataset is not one this counts (upstream's function then runs)."""
    import datasets
    import numpy as np

    if not isinstance(dataset, datasets.Dataset) or not set(COLUMNS) <= set(dataset.column_names):
        return None
    counts: dict[int, int] = {}
    for table in dataset.with_format("arrow").iter(batch_size=BATCH_ROWS):
        ids, mask = (table.column(name).combine_chunks() for name in COLUMNS)
        if not (_integer_lists(ids) and _lists(mask)) or ids.null_count or mask.null_count:
            return None
        lengths = ids.value_lengths().to_numpy(zero_copy_only=False)
        if (lengths != mask.value_lengths().to_numpy(zero_copy_only=False)).any():
            return None  # upstream's boolean indexing raises on these: let it
        flat_ids, flat_mask = ids.flatten(), mask.flatten()
        if flat_ids.null_count or flat_mask.null_count:
            return None
        values = np.asarray(flat_ids.to_numpy(zero_copy_only=False))
        supervised = np.asarray(flat_mask.to_numpy(zero_copy_only=False)) != 0
        rows = np.repeat(np.arange(len(lengths)), lengths)[supervised]
        unique, first, number = np.unique(values[supervised], return_index=True, return_counts=True)
        order = np.lexsort((unique, rows[first]))  # by the first row holding it, then by id
        for token, count in zip(unique[order].tolist(), number[order].tolist(), strict=True):
            counts[token] = counts.get(token, 0) + count
    return counts


def _lists(array: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_list(array.type) or pa.types.is_large_list(array.type)


def _integer_lists(array: Any) -> bool:
    import pyarrow as pa

    return _lists(array) and pa.types.is_integer(array.type.value_type)
