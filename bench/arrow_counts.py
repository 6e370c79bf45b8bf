"""Rows, tokens and supervised spans of a table of tokenized rows (``input_ids``, ``loss_mask``),
counted with pyarrow and numpy (no Python loop over tokens), for ours and the peer alike.

A supervised span is a run of ones in a row's loss mask: one assistant turn (or the part of it)
the row trains on. SpecForge stores each row as a ``[1, n]`` nested list: one level is flattened.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def _per_row(column: pa.ChunkedArray | pa.Array) -> pa.ListArray:
    """The column as one list per row, nested lists of one row flattened."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    while pa.types.is_list(array.type.value_type) or pa.types.is_large_list(array.type.value_type):
        array = pc.list_flatten(array)
    return array


def counts(table: pa.Table) -> tuple[int, int, int]:
    """(rows, tokens, supervised spans) of ``table``."""
    ids = _per_row(table.column("input_ids"))
    tokens = int(pc.sum(pc.list_value_length(ids)).as_py() or 0)
    masks = _per_row(table.column("loss_mask"))
    bits = masks.flatten().to_numpy(zero_copy_only=False).astype(bool)
    starts = masks.offsets.to_numpy()[:-1] - masks.offsets[0].as_py()
    previous = np.concatenate(([False], bits[:-1]))
    previous[starts[starts < len(bits)]] = False  # a row's first token starts a span
    return table.num_rows, tokens, int((bits & ~previous).sum())
