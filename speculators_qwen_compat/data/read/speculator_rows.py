"""Speculator-format rows: ``input_ids`` + ``loss_mask``, as ``regenerate-responses`` writes them.

0.7+ pass such rows through, <= 0.6 cannot read them (docs/upstream.md, "Speculator-format rows").
Here: why a row is not kept (``unusable``), its duplicate-check key (``identity``), and the column
types of a run mixing them with conversations (``aligned``).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

NOT_LISTS = "speculator-format row: input_ids and loss_mask are not lists of token ids"
LENGTHS_DIFFER = "speculator-format row: input_ids and loss_mask differ in length"
NOT_BINARY = "speculator-format row: loss_mask holds values other than 0 and 1"
NOTHING_SUPERVISED = "speculator-format row: loss_mask supervises no token"
BEYOND_SEQ_LENGTH = "speculator-format row: no supervised token inside --seq-length"
DROPPED_UPSTREAM = "speculator-format row dropped by speculators' pass-through"
#: <= 0.6 have no pass-through: such a row reaches the template path as a row without turns.
UNSUPPORTED = (
    "speculator-format row (input_ids + loss_mask): this speculators release cannot train on "
    "such rows (0.7+ pass them through)"
)
#: The column ``quality`` counts such rows under (compat_report.json "columns").
COLUMN = "input_ids+loss_mask"


def unusable(ids: Any, mask: Any, max_length: int) -> str | None:
    """Why this row cannot be kept whatever ``--minimum-valid-tokens`` says, or None.

    Upstream raises on a row whose lengths differ (ending the whole run), and 0.7 keeps a
    row that supervises nothing; such rows are skipped and counted instead.
    """
    if not isinstance(ids, list) or not isinstance(mask, list):
        return NOT_LISTS
    if len(ids) != len(mask):
        return LENGTHS_DIFFER
    if not set(mask) <= {0, 1}:  # a mixed run may store masks as bool (0.7)
        return NOT_BINARY
    if not any(mask[:max_length]):
        return BEYOND_SEQ_LENGTH if any(mask) else NOTHING_SUPERVISED
    return None


def identity(row_id: Any, ids: list[int], mask: list[int]) -> str:
    """The text hashed for the duplicate check: the row's ``id`` (what a rerun of
    regenerate-responses without ``--resume`` repeats), else its tokens and mask."""
    if row_id not in (None, ""):
        return "speculator-format id " + json.dumps(row_id, ensure_ascii=False)
    return json.dumps([ids, mask])


def aligned(features: list[Any]) -> Any | None:
    """The features every part of a mixed run is cast to, or None when they already agree or
    differ in more than integer widths.

    datasets writes a computed ``input_ids`` column as int32 (its writer narrows that column
    by name), and 0.7's tokenizer gives bool masks, so rendered parts hold int32 ids (and
    bool masks on 0.7) while passed-through parts keep the int64 their JSON was read as, and
    ``concatenate_datasets`` refuses the mix ("features can't be aligned"). Each integer
    column takes the narrowest type among the parts: what a run of conversations alone
    writes. Values are unchanged: ids are checked by Arrow's cast, masks are 0/1
    (``unusable``).
    """
    first = features[0]
    if all(f == first for f in features[1:]):
        return None
    if any(set(f) != set(first) for f in features[1:]):
        return None
    out = first.copy()
    for column in first:
        widths = [_int_width(f[column]) for f in features]
        if any(w is None for w in widths):
            if any(f[column] != first[column] for f in features[1:]):
                return None
            continue
        narrowest = min(widths, key=lambda dtype: _BITS[dtype])
        out[column] = _with_width(first[column], narrowest)
    return out


_BITS = {"bool": 1, "int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _int_width(feature: Any) -> str | None:
    """``bool``/``int32``/``int64``... of an integer Value or a list of them, else None."""
    inner = getattr(feature, "feature", feature)
    dtype = getattr(inner, "dtype", None)
    return dtype if dtype in _BITS else None


def _with_width(feature: Any, dtype: str) -> Any:
    from datasets import Value

    if hasattr(feature, "feature"):
        return dataclasses.replace(feature, feature=Value(dtype))
    return Value(dtype)
