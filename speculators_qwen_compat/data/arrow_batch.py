"""A map batch handed to datasets with its ``messages`` column typed ``List(Json())``.

``datasets.map`` infers a batch's column types from its values, and each worker writes its own
shard: a ``messages`` column of plain chats infers a struct (missing keys filled with nulls),
one with tool calls or image parts ``Json``, and shards that disagree cannot be joined. An Arrow
table whose ``messages`` is JSON text per turn fixes the type for every shard and keeps each
turn as written; the other columns are typed by datasets' own inference, as before.
"""

from __future__ import annotations

import json
from typing import Any

MESSAGES = "messages"


def with_json_messages(result: Any) -> Any:
    """``result`` (a ``_preprocess_batch`` output) as a ``pyarrow.Table`` whose ``messages`` is
    ``List(Json())``; anything else (no ``messages``, no rows, a turn JSON cannot hold) as it
    came, for datasets to type as it always did."""
    if not isinstance(result, dict) or not result.get(MESSAGES):
        return result
    try:
        turns = [
            None if conversation is None else [_json_text(turn) for turn in conversation]
            for conversation in result[MESSAGES]
        ]
    except (TypeError, ValueError):
        return result
    import pyarrow
    from datasets import Dataset, Features, Json, List

    others = {name: column for name, column in result.items() if name != MESSAGES}
    table = Dataset.from_dict(others).with_format("arrow")[:] if others else None
    features = Features({MESSAGES: List(Json())})
    messages = Dataset.from_dict({MESSAGES: turns}, features=features).with_format("arrow")[:]
    if table is None:
        return messages
    if table.num_rows != messages.num_rows:
        return result  # not a table's shape: datasets says what is wrong with it
    joined = table.append_column(messages.schema.field(MESSAGES), messages.column(MESSAGES))
    return pyarrow.Table.from_arrays(joined.columns, schema=joined.schema.remove_metadata())


def _json_text(turn: Any) -> str:
    """One turn as JSON text; a lone surrogate (invalid Unicode) or a value JSON cannot hold
    raises, and the batch goes to datasets as it came."""
    text = json.dumps(turn, ensure_ascii=False)
    text.encode("utf-8")
    return text
