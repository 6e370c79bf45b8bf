"""The skip reasons of a row whose JSON line cannot be read, worded once for both commands that
read lines (prepare_data's reader, fixes/data/conversations.py; regenerate-responses',
regenerate/lines.py): the counts of the two reports name a bad line the same way."""

from __future__ import annotations

#: a ``\\ud800``-``\\udfff`` escape without its pair: JSON reads it, but it has no UTF-8 form
#: (no tokenizer, Arrow column or request can hold it)
INVALID_UNICODE = "invalid Unicode in the line (a lone surrogate)"
NOT_UTF8 = "invalid Unicode in the line (not UTF-8)"
MALFORMED_LINE = "malformed JSON line"
NOT_AN_OBJECT = "row is not a JSON object"
