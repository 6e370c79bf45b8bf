"""Which bytes at the end of an earlier regenerate-responses output a killed run left cut.

Why: upstream's ``load_seen`` counts a conversation done on one row, so a cut write keeps it half.
Each write is one conversation's rows ending in a newline: a last line without one was cut, and
goes with that conversation's rows before it. Only reads (output.py cuts).
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import IO


def torn_start(file: IO[bytes], size: int) -> tuple[int, int]:
    """(offset where the cut write starts, rows in it counting the cut line) for a file of
    ``size`` bytes; (size, 0) when it ends in a newline (nothing cut)."""
    if not size:
        return 0, 0
    file.seek(size - 1)
    if file.read(1) == b"\n":
        return size, 0
    keep = _after_last_newline(file, size)
    file.seek(keep)
    tail = file.read()
    whole = _parsed(tail)
    owner = _row_owner(whole) if isinstance(whole, dict) else _torn_owner(tail)
    rows = 1
    if owner is None and keep > 0:  # whose it is unknown: the rows before may be its write
        start = _after_last_newline(file, keep - 1)
        file.seek(start)
        before = _parsed(file.read(keep - start))
        owner = _row_owner(before) if isinstance(before, dict) else None
    while owner is not None and keep > 0:
        start = _after_last_newline(file, keep - 1)
        file.seek(start)
        row = _parsed(file.read(keep - start))
        if not isinstance(row, dict) or _row_owner(row) != owner:
            break
        keep, rows = start, rows + 1
    return keep, rows


_PRIMARY_ID = re.compile(rb'"primary_id"\s*:\s*"((?:[^"\\]|\\.)*)"')
_ROW_ID = re.compile(rb'^\s*\{\s*"id"\s*:\s*"((?:[^"\\]|\\.)*)_gen\d+"')
_GEN = re.compile(r"_gen\d+$")


def _torn_owner(tail: bytes) -> str | None:
    """The conversation a torn row belongs to (its ``primary_id``, else its ``id`` without
    upstream's ``_genN`` suffix), when the bytes that survived say it."""
    for pattern in (_PRIMARY_ID, _ROW_ID):
        match = pattern.search(tail)
        if match:
            with contextlib.suppress(ValueError):
                return json.loads(b'"' + match.group(1) + b'"')
    return None


def _row_owner(row: dict) -> str | None:
    """The conversation of a whole row: its ``primary_id``, else its ``id`` without ``_genN``
    (as upstream's ``load_seen`` keys it)."""
    for key in ("primary_id", "id"):
        value = row.get(key)
        if isinstance(value, str) and value:
            return value if key == "primary_id" else _GEN.sub("", value)
    return None


def _parsed(line: bytes) -> object:
    try:
        return json.loads(line)
    except ValueError:
        return None


def _after_last_newline(file: IO[bytes], size: int, block: int = 1 << 16) -> int:
    """Offset just after the last ``\\n`` of a file of ``size`` bytes (0 when it has none)."""
    end = size
    while end > 0:
        start = max(0, end - block)
        file.seek(start)
        chunk = file.read(end - start)
        index = chunk.rfind(b"\n")
        if index >= 0:
            return start + index + 1
        end = start
    return 0
