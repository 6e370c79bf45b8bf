"""The rows of a local JSON-lines ``--dataset``, one line at a time: a bad line is its row's skip.

Why: upstream's streaming Arrow loader stops the whole run on one bad line (docs/upstream.md,
"Regenerate responses"). Each row is the dict its line holds, as prepare_data's reader gives it.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from speculators_qwen_compat.data.read.unreadable import (
    INVALID_UNICODE,
    MALFORMED_LINE,
    NOT_AN_OBJECT,
    NOT_UTF8,
)

#: a ``\\uD800``-``\\uDFFF`` escape: only a line holding one can decode to a lone surrogate
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")


class JsonLines:
    """``for row in JsonLines(path, skip)``: each line's row (a dict); a line that is not one
    calls ``skip(reason)`` and is left out. Blank lines are not rows. Iterable again from the
    start (upstream iterates once)."""

    def __init__(self, path: Path, skip: Callable[[str], None]) -> None:
        self.path, self.skip = path, skip

    def __iter__(self) -> Iterator[dict[str, Any]]:
        with self.path.open("rb") as file:
            for number, raw in enumerate(file, start=1):
                if number == 1 and raw.startswith(codecs.BOM_UTF8):
                    raw = raw[len(codecs.BOM_UTF8) :]
                if not raw.strip():
                    continue
                row, reason = read_line(raw)
                if reason is not None:
                    self.skip(reason)
                    continue
                yield row


def read_line(raw: bytes) -> tuple[Any, str | None]:
    """(the row, None), or (None, why the line is not a row)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, NOT_UTF8
    try:
        row = json.loads(text)
    except ValueError:
        return None, MALFORMED_LINE
    if not isinstance(row, dict):
        return None, NOT_AN_OBJECT
    if _SURROGATE_ESCAPE.search(text) and _lone_surrogate(row):
        return None, INVALID_UNICODE
    return row, None


def _lone_surrogate(value: Any) -> bool:
    """Whether a string in ``value`` holds a surrogate that pairs with nothing (it cannot be
    sent: UTF-8 has no form for it)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_lone_surrogate(k) or _lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_lone_surrogate(item) for item in value)
    return False


def is_json_lines(path: Path) -> bool:
    """A local ``.jsonl`` file (a ``.json`` file, an array or one object over many lines,
    stays upstream's loader's)."""
    return path.suffix.lower() == ".jsonl" and path.is_file()
