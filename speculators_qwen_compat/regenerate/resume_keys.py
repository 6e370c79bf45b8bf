"""Which rows of a local JSON-lines ``--dataset`` an earlier output holds under Arrow-read keys.

Why: upstream's resume key hashes a row as Arrow read it (None-filled keys, widened numbers),
which lines.py does not (docs/upstream.md, "Regenerate responses"): without this, ``--resume``
would send those rows again. They are matched by their Arrow-read key too.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

#: upstream's key of a row without an id (``_content_hash``)
HASHED = "hash_"

PrimaryId = Callable[[Mapping[str, Any]], str]


def hashed_keys(seen: set[str]) -> bool:
    """Whether an earlier output holds keys made from a row's content (no id)."""
    return any(key.startswith(HASHED) for key in seen)


def keys_as_read_now(
    seen: set[str],
    lines: Iterable[Mapping[str, Any]],
    arrow_rows: Iterable[Mapping[str, Any]],
    primary_id: PrimaryId,
) -> set[str]:
    """The keys (of the rows as ``lines`` gives them) of the conversations whose key as the
    Arrow loader read them (``arrow_rows``, the same file) is in ``seen``. The two are read in
    step: a pair that is not the same row (its None-filled keys and number types aside) is
    left out; a file the Arrow loader cannot read (a line lines.py skips) ends the pairing
    there (no earlier run read past it that way)."""
    found: set[str] = set()
    arrow = iter(arrow_rows)
    for row in lines:
        try:
            as_arrow = next(arrow)
        except StopIteration:
            break
        except Exception:  # upstream's loader refuses the file from here on (a bad line)
            break
        key = primary_id(row)
        if key in seen or not _same_row(row, as_arrow):
            continue
        if primary_id(as_arrow) in seen:
            found.add(key)
    with contextlib.suppress(Exception):
        close = getattr(arrow, "close", None)
        if close is not None:
            close()
    return found


def _same_row(plain: Any, filled: Any) -> bool:
    return _without_fill(plain) == _without_fill(filled)


def _without_fill(value: Any) -> Any:
    """``value`` without what Arrow adds: keys whose value is None dropped, numbers compared
    as floats."""
    if isinstance(value, Mapping):
        return {k: _without_fill(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_without_fill(item) for item in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
        return number if not math.isnan(number) else "nan"
    return value
