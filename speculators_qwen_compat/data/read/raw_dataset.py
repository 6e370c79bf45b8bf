"""Upstream's ``load_raw_dataset`` answered by our reader: local JSON/JSONL, parquet, Arrow and
Hub tables as JSON-text rows (files.py, table_rows.py; docs/upstream.md, "Conversation column and
normalization"); speculator-format rows left to upstream, each given its source; and several
``--data`` joined whatever integer widths each part has (speculator_rows.py ``aligned``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from speculators_qwen_compat.core.errors import DataError
from speculators_qwen_compat.core.upstream import is_pretokenized
from speculators_qwen_compat.data.account import ledger
from speculators_qwen_compat.data.read import sources
from speculators_qwen_compat.data.read.columns import ColumnOptions, no_conversation_message
from speculators_qwen_compat.data.read.files import SOURCE_COLUMN, load_rows
from speculators_qwen_compat.data.read.speculator_rows import aligned


def load(upstream: Callable[[], Any], spec: str, returns_pair: bool) -> Any:
    """What ``load_raw_dataset(spec)`` returns (``returns_pair``: 0.6+'s (dataset, normalize
    function), else the dataset), read by our reader where it reads ``spec``; ``upstream``:
    the release's own call, for the rest."""
    found = sources.resolve(spec)
    if found is None:
        result = upstream()
        _require_conversations(spec, result[0] if returns_pair else result)
        return result
    ledger.data_read(found.record())
    dataset = load_rows(found.sources, ColumnOptions.of_this_run().conversations_key)
    if dataset is None:  # speculator-format rows: upstream reads them itself
        result = upstream()
        if returns_pair:
            return (_with_sources(result[0], spec), *result[1:])
        return _with_sources(result, spec)
    return (dataset, None) if returns_pair else dataset


def aligned_parts(parts: list[Any]) -> list[Any]:
    """Several ``--data`` mixing speculator-format rows with conversations: every part cast to
    the same integer widths first; upstream's concatenation refuses the mix otherwise, in every
    release with a pass-through."""
    features = aligned([part.features for part in parts]) if len(parts) > 1 else None
    if features is None:
        return parts
    return [part if part.features == features else part.cast(features) for part in parts]


def _with_sources(dataset: Any, spec: str) -> Any:
    """Speculator-format rows as upstream read them, each with its source ``SPEC[i]`` (its
    index in the file or folder), for the counts' examples and the duplicate check."""
    if SOURCE_COLUMN in dataset.column_names:
        return dataset
    return dataset.add_column(SOURCE_COLUMN, [f"{spec}[{i}]" for i in range(len(dataset))])


def _require_conversations(spec: str, dataset: Any) -> None:
    columns = list(getattr(dataset, "column_names", None) or [])
    options = ColumnOptions.of_this_run()
    if not columns or is_pretokenized(dict.fromkeys(columns)):
        return
    try:
        first = dataset[0] if len(dataset) else {}
    except Exception:  # a streaming or odd data set: let the rows decide
        return
    from speculators_qwen_compat.data.read.columns import NoConversation, find_conversation

    try:
        find_conversation(first, options)
    except NoConversation:
        raise DataError(
            no_conversation_message(f"--data {spec}", columns, options.conversations_key)
        ) from None
