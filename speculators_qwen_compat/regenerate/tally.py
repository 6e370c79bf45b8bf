"""What one regenerate-responses run did with each conversation: its summary line and report.json.

Target: speculators 0.8.1/0.9.0 ``regenerate-responses`` (docs/regenerate-responses.md
"Counting"). Why: upstream prints "Pipeline complete" with an ok/err tally that does not say what
became of each conversation. Every conversation read ends in exactly one category:

- ``regenerated``: every step answered; ``cut_short``: the rows of its answered steps are
  written (a reply cut at --max-tokens, still thinking included), the reason says where it stopped;
- ``skipped``: no request was sent (the normaliser or the target's template rejects what would
  be sent), by reason; ``failed``: no row (the server refused its first request, or a request
  outlived its retries while the server stayed alive), by status or reason;
- ``already_done``: in the output already (``--resume``);
- ``not_reached``: read or not, never finished because the run stopped (a server fault, the
  consecutive-failure limit); counted from the input's size when the run stops.

``conversations_in`` is their sum, in the printed line and in the report alike.
"""

from __future__ import annotations

import errno
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
    """Write the report whole (a temporary file renamed over it): it is the run's last act. On
    a full disk (no room for the temporary copy) the run's own report, written when it started,
    is rewritten in place: its blocks are the room the last report needs."""
    path = report_path(outfile)
    data = (json.dumps(tally.report(**extra), indent=2, ensure_ascii=False) + "\n").encode()
    scratch = path.with_name(path.name + ".tmp")
    try:
        scratch.write_bytes(data)
        os.replace(scratch, path)
    except OSError as exc:
        scratch.unlink(missing_ok=True)
        if exc.errno != errno.ENOSPC or not path.exists():
            raise
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
        finally:
            os.close(fd)
    return path
