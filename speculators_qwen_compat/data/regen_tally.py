"""What one regenerate-responses run did with each conversation, its summary line and report.

Every conversation read ends in exactly one of: regenerated (every step answered), cut short
(the rows of its finished steps are written; the reason says why it stopped), skipped before any
request (the normaliser or the target's template rejects it), failed (no row: the server refused
its first request for its content, or its first reply could not be used), or already in
``--outfile`` (``--resume``). ``conversations_in`` is their sum. A fault of the server is none of
these: it ends the run (fixes/regenerate/regen_run.py).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: More than this many conversations failing with an error that is not a data problem (a bug in
#: speculators or in this package) fail the run, as prepare_data's limit (run_report.py).
ERROR_LIMIT = 3
REPORT_SUFFIX = ".report.json"


@dataclass
class RegenTally:
    conversations_in: int = 0
    regenerated: int = 0
    resumed: int = 0
    rows_out: int = 0
    cut_short: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    notes: Counter[str] = field(default_factory=Counter)
    warnings: Counter[str] = field(default_factory=Counter)
    #: failures that are not the data's (a bug): past ERROR_LIMIT the run fails
    errors: int = 0
    first_error: str = ""

    def summary(self) -> str:
        """``regenerated N of M conversations (R rows); cut short C: ...; skipped K: ...;
        failed J: ...``"""
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
                line += ": " + ", ".join(f'{n} x "{r}"' for r, n in counts.most_common(6))
        if self.resumed:
            line += f"; {self.resumed} already in the output (--resume)"
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
            "errors": self.errors,
            "notes": dict(self.notes.most_common()),
            "warnings": dict(self.warnings.most_common()),
            **extra,
        }


def report_path(outfile: Path) -> Path:
    """``OUT.report.json`` beside ``--outfile`` (``out.jsonl`` -> ``out.report.json``)."""
    return outfile.with_name(outfile.stem + REPORT_SUFFIX)


def write_report(outfile: Path, tally: RegenTally, **extra: Any) -> Path:
    path = report_path(outfile)
    text = json.dumps(tally.report(**extra), indent=2, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")
    return path
