"""A map batch handed to datasets with its ``messages`` column typed ``List(Json())``.

Why: ``datasets.map`` types each worker's shard from its own values, and shards that disagree
cannot be joined (docs/upstream.md, "The messages column"). JSON text per turn fixes the type for
every shard; the other columns keep datasets' own inference.
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
    conversations = result[MESSAGES]
    try:
        turns = [_json_text(turn) for conversation in conversations for turn in conversation]
    except (TypeError, ValueError):  # a None conversation, a turn JSON cannot hold
        return result
    import pyarrow
    from datasets import Dataset

    others = {name: column for name, column in result.items() if name != MESSAGES}
    if any(len(column) != len(conversations) for column in others.values()):
        return result  # not a table's shape: datasets says what is wrong with it
    offsets = [0]
    for conversation in conversations:
        offsets.append(offsets[-1] + len(conversation))
    # Json's own Arrow type (the arrow.json extension over strings), built directly: datasets'
    # encoder would parse every turn again to check it is JSON
    json_turns = pyarrow.ExtensionArray.from_storage(pyarrow.json_(), pyarrow.array(turns))
    messages = pyarrow.ListArray.from_arrays(pyarrow.array(offsets, pyarrow.int32()), json_turns)
    table = Dataset.from_dict(others).with_format("arrow")[:] if others else None
    if table is None:
        return pyarrow.table({MESSAGES: messages})
    joined = table.append_column(MESSAGES, messages)
    return joined.replace_schema_metadata(None)  # the types say it all: List(Json()) included


def _json_text(turn: Any) -> str:
    """One turn as JSON text; a lone surrogate (invalid Unicode) or a value JSON cannot hold
    raises, and the batch goes to datasets as it came."""
    text = json.dumps(turn, ensure_ascii=False)
    text.encode("utf-8")
    return text
