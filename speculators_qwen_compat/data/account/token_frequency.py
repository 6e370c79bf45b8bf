"""The token-frequency file counted over Arrow batches with numpy instead of one row at a time.

Upstream's ``save_token_frequency_distribution`` reads every output row back in torch format
(docs/upstream.md, "Token frequencies"); this writes the same dict in the same insertion order,
or leaves the file to upstream (an existing file, data of another shape)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

COLUMNS = ("input_ids", "loss_mask")
BATCH_ROWS = 2048


def save(dataset: Any, output_path: Any) -> bool:
    """Count ``dataset`` and save ``token_freq.pt`` at ``output_path``; False (nothing written)
    where upstream's own function must run."""
    path = Path(output_path)
    counts = None if path.exists() else token_frequencies(dataset)
    if counts is None:
        return False
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(counts, path)
    return True


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
