"""What one regenerate-responses run did with each conversation: its summary line and report.json.

Why: upstream's "Pipeline complete" tally does not say what became of each conversation. Each
ends in exactly one category, summed as ``conversations_in`` (docs/regenerate-responses.md,
"Counting").
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: More than this many conversations failing with an error that is not a data problem (a bug in
#: speculators or in this package) fail the run, as prepare_data's limit (run_report.py).
ERROR_LIMIT = 3
REPORT_SUFFIX = ".report.json"
#: the failed reason of a conversation lost to an error that is not a data problem (a bug)
BUG = "error (not a data problem)"


@dataclass
class RegenTally:
    conversations_in: int = 0
    regenerated: int = 0
    resumed: int = 0
    not_reached: int = 0
    rows_out: int = 0
    cut_short: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    notes: Counter[str] = field(default_factory=Counter)
    warnings: Counter[str] = field(default_factory=Counter)
    #: failures that are not the data's (a bug, also counted under ``failed``): past ERROR_LIMIT
    #: the run fails
    errors: int = 0
    first_error: str = ""
    #: rows a killed run left half written at the end of the output (``--resume`` drops them)
    torn_rows: int = 0

    def counted(self) -> int:
        """Conversations in one category so far (``conversations_in`` once the run ends)."""
        return (
            self.regenerated
            + sum(self.cut_short.values())
            + sum(self.skipped.values())
            + sum(self.failed.values())
            + self.resumed
            + self.not_reached
        )

    def summary(self) -> str:
        """``regenerated N of M conversations (R rows); cut short C: ...; skipped K: ...;
        failed J: ...[; A already in the output (--resume)][; U not reached (run stopped)]``"""
        line = (
            f"regenerated {self.regenerated} of {self.conversations_in} conversations "
            f"({self.rows_out} rows)"
        )
        for label, counts in (
            ("cut short", self.cut_short),
            ("skipped", self.skipped),
            ("failed", self.failed),
        ):
            line += f"; {label} {sum(counts.values())}"
            if counts:
                line += ": " + _most_frequent(counts)
        if self.resumed:
            line += f"; {self.resumed} already in the output (--resume)"
        if self.not_reached:
            line += f"; {self.not_reached} not reached (run stopped)"
        if self.torn_rows:
            torn = f"{self.torn_rows} rows of a torn last write"
            line += f"; {torn} set aside from the earlier output"
        for text, count in self.notes.most_common():
            line += f"; {count} {text}"
        for text, count in self.warnings.most_common():
            line += f"; warning: {count} {text}"
        return line

    def report(self, **extra: Any) -> dict[str, Any]:
        return {
            "conversations_in": self.conversations_in,
            "regenerated": self.regenerated,
            "rows_out": self.rows_out,
            "cut_short": dict(self.cut_short.most_common()),
            "skipped": dict(self.skipped.most_common()),
            "failed": dict(self.failed.most_common()),
            "already_done": self.resumed,
            "not_reached": self.not_reached,
            "errors": self.errors,
            "torn_rows": self.torn_rows,
            "notes": dict(self.notes.most_common()),
            "warnings": dict(self.warnings.most_common()),
            **extra,
        }


#: reasons the line lists per category (the report has them all)
SHOWN_REASONS = 6


def _most_frequent(counts: Counter[str]) -> str:
    """The most frequent reasons, and how many more there are (``and N more``)."""
    shown = counts.most_common(SHOWN_REASONS)
    text = ", ".join(f'{n} x "{r}"' for r, n in shown)
    rest = len(counts) - len(shown)
    if rest:
        conversations = sum(counts.values()) - sum(n for _, n in shown)
        text += f", and {rest} more ({conversations} conversations; each in the report)"
    return text


def report_path(outfile: Path) -> Path:
    """``OUTFILE.report.json`` beside ``--outfile`` (``out.jsonl`` -> ``out.jsonl.report.json``):
    named after the whole file name, so ``out.jsonl`` and ``out.json`` in one folder each have
    their own (a name from the stem alone would be shared, one run's report over the other's)."""
    return outfile.with_name(outfile.name + REPORT_SUFFIX)


def write_report(outfile: Path, tally: RegenTally, **extra: Any) -> Path:
    """Write the report whole and atomically: its bytes go to a scratch file in the same folder
    (``scratch_path``), renamed over the report; the last report written is never truncated
    nor removed, so a write that fails (a full disk) leaves it as it was. The scratch file is
    opened without truncating it: the blocks ``reserve_room`` allocated in it when the run
    started are the room the run's last report takes on a full disk."""
    path = report_path(outfile)
    data = (json.dumps(tally.report(**extra), indent=2, ensure_ascii=False) + "\n").encode()
    scratch = scratch_path(path)
    try:
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT, 0o666)
        try:
            written = 0
            while written < len(data):
                written += os.pwrite(fd, data[written:], written)
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
        os.replace(scratch, path)
    except OSError:
        with contextlib.suppress(OSError):
            scratch.unlink()
        raise
    return path


#: bytes kept for the run's last report (a report with a few dozen reasons is a few KB)
REPORT_ROOM = 16 * 1024


def reserve_room(outfile: Path) -> None:
    """Allocate REPORT_ROOM bytes in the report's scratch file (``posix_fallocate``), the room
    the run's last report is written into when the disk fills during the run. Best effort: a
    file system that cannot allocate ahead (or a disk already full) keeps no room, and a last
    report that then cannot be written leaves the one written when the run started."""
    scratch = scratch_path(report_path(outfile))
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT, 0o666)
        try:
            os.posix_fallocate(fd, 0, REPORT_ROOM)
        finally:
            os.close(fd)


def scratch_path(report: Path) -> Path:
    """Where a report is written before it is renamed over ``report`` (the same folder: the
    rename is atomic)."""
    return report.with_name(report.name + ".tmp")
