"""What a regenerate-responses run left, as the bench's tables show it (bench/regen_faults.py,
bench/regen_bad_day.py): the rows on disk and the last line printed."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from regen_figures import _plain


def rows(work: Path, conversations: bool = False) -> str:
    """Rows on disk: in out.jsonl, else the partial file (``conversations``: how many
    conversations they are); conversations twice (``dup``); lines that are not JSON (``bad``)."""
    for name in ("out.jsonl", "out.partial.jsonl"):
        path = work / name
        if path.exists():
            ids, convs, bad = Counter(), set(), 0
            for line in path.read_bytes().split(b"\n"):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    ids[row["id"]] += 1
                    convs.add(row.get("primary_id"))
                except ValueError:
                    bad += 1
            dup = sum(1 for n in ids.values() if n > 1)
            counted = f" ({len(convs)} conv.)" if conversations else ""
            return f"{sum(ids.values())}{counted} in {name}" + (
                f", {dup} dup" if dup else "") + (f", {bad} bad" if bad else "")  # fmt: skip
    return "none"


def last_line(stdout: str, stderr: str, code: int, width: int = 400) -> str:
    """The run's last line: stdout's when it ended well, else stderr's (``width`` characters)."""
    lines = stdout.strip().splitlines() if code == 0 else []
    lines = lines or stderr.strip().splitlines() or [""]
    return _plain(lines[-1][:width])
