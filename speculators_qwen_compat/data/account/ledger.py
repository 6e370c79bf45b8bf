"""The skip ledger: which conversations were read, which were skipped and why, across processes.

Why: ``datasets.map`` runs the fixes in worker processes, so counts cannot live in one process.
Each appends one JSON line per outermost batch to ``<ledger dir>/<pid>.jsonl`` (rows, skips by
reason, notes, quality statistics); the run report adds them up at the end.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import traceback
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speculators_qwen_compat.core.run_options import current_options
from speculators_qwen_compat.data.account.quality import QualityStats
from speculators_qwen_compat.data.read import run_folders

log = logging.getLogger("speculators_qwen_compat")

#: The file prepare_data writes beside upstream's output: what the run read, kept and skipped.
REPORT_NAME = "compat_report.json"
EXAMPLES_PER_REASON = 5


@dataclass
class _Pending:
    """The counts of one outermost batch (or of one event outside any batch)."""

    seen: int = 0
    skips: list[tuple[str, str]] = field(default_factory=list)
    notes: Counter[str] = field(default_factory=Counter)
    quality: QualityStats = field(default_factory=QualityStats)
    kept: int = 0
    errors: list[list[str]] = field(default_factory=list)  # [where, reason, traceback]
    reads: list[dict[str, Any]] = field(default_factory=list)  # data/read/sources.py records

    def __bool__(self) -> bool:
        return bool(
            self.seen
            or self.skips
            or self.notes
            or self.quality
            or self.kept
            or self.errors
            or self.reads
        )


@dataclass
class Batch:
    """The batch in progress in this process: its counts (``counts``, written to the run's
    ledger when it ends) and what the stages inside upstream's batch function hand each other
    (route/render.py, route/script.py), so no stage shares a closure with another."""

    counts: _Pending
    #: each conversation's ``file:line`` (the row guard's examples of a skip)
    sources: list[str] | None = None
    #: ``--minimum-valid-tokens``: the row guard filters on it to count such rows
    minimum: int | None = None
    #: 0.8+: why the conversation being rendered failed, for its count
    render_error: Exception | None = None
    #: <= 0.7: the row upstream renders alone, for its weight-0 turns (data/render/weights.py)
    row: Any = None


#: The batch being counted: opened by the outermost ``batch`` (the first stage around upstream's
#: batch function), read by every stage called inside it, written out when it ends. It travels
#: with the call, so nothing outlives the batch.
_open: ContextVar[Batch | None] = ContextVar("speculators_qwen_compat_batch", default=None)
#: Reasons logged outside a run, once per process (as ``warnings`` shows a warning once).
_warned_reasons: set[str] = set()


@contextmanager
def batch(rows: int) -> Iterator[Batch]:
    """Count ``rows`` as read; the outermost batch writes what was counted when it ends (a
    batch opened inside another is that one)."""
    opened = _open.get()
    if opened is not None:
        yield opened
        return
    opened = Batch(_Pending(seen=rows))
    token = _open.set(opened)
    try:
        yield opened
    finally:
        _open.reset(token)
        _write(opened.counts)


def open_batch() -> Batch | None:
    """The batch in progress in this process, if any."""
    return _open.get()


@contextmanager
def _counting() -> Iterator[_Pending]:
    """The open batch's counts, or outside any batch counts written at once."""
    opened = _open.get()
    if opened is not None:
        yield opened.counts
        return
    alone = _Pending()
    yield alone
    _write(alone)


def skip(reason: str, where: str = "") -> None:
    """Record one skipped conversation. Outside a run the reason is logged once instead."""
    with _counting() as pending:
        pending.skips.append((reason, where))


def keep() -> None:
    """Record one conversation that gave at least one row."""
    with _counting() as pending:
        pending.kept += 1


def reject(exc: BaseException, where: str = "") -> None:
    """A conversation that raised: skipped and counted when its data is the problem (a
    template or normaliser rejection), else recorded as an error of upstream or ours, which
    is not a skip and fails the run past a few (fixes/data/run_report.py). A ``CompatError``
    (fatal on purpose, e.g. data/render/render_faults.py's) is raised again: it ends the run."""
    from speculators_qwen_compat.core.errors import CompatError, reason_of
    from speculators_qwen_compat.data.account.row_errors import is_data_problem
    from speculators_qwen_compat.data.render.render_faults import refusal_reason

    if isinstance(exc, CompatError):  # fatal on purpose (a render server gone): not a row's
        raise exc
    if is_data_problem(exc):
        skip(refusal_reason(exc) or reason_of(exc), where)
        return
    with _counting() as pending:
        text = "" if pending.errors else "".join(traceback.format_exception(exc))
        pending.errors.append([where, f"{type(exc).__name__}: {reason_of(exc)}", text])


def note(text: str, count: int = 1) -> None:
    """Count an event that is not a skip (e.g. "turns with role 'x' treated as assistant")."""
    with _counting() as pending:
        pending.notes[text] += count


def data_read(record: dict[str, Any]) -> None:
    """Record what one ``--data`` value was read as (data/read/sources.py ``record``): its
    split, the files read and those not read, for the last line and the report."""
    with _counting() as pending:
        pending.reads.append(record)


def quality() -> QualityStats:
    """The open batch's data-quality statistics, to add rows to (outside a batch: statistics
    nobody reads)."""
    opened = _open.get()
    return opened.counts.quality if opened is not None else QualityStats()


def forget_logged_reasons() -> None:
    """Log again the reasons already logged once outside a run: the state a fresh interpreter
    starts with (for callers that run several runs in one process, e.g. tests)."""
    _warned_reasons.clear()


def _write(pending: _Pending) -> None:
    """Append ``pending`` to this process's ledger file of the open run; outside a run, log
    each skip reason and note once."""
    if not pending:
        return
    directory = current_options().ledger_dir
    if directory and os.path.isdir(directory):
        record: dict[str, Any] = {"seen": pending.seen, "skips": pending.skips}
        if pending.notes:
            record["notes"] = dict(pending.notes)
        if pending.quality:
            record["quality"] = pending.quality.to_json()
        if pending.kept:
            record["kept"] = pending.kept
        if pending.errors:
            record["errors"] = pending.errors
        if pending.reads:
            record["reads"] = pending.reads
        line = json.dumps(record, ensure_ascii=False)
        with open(os.path.join(directory, f"{os.getpid()}.jsonl"), "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
        return
    for reason, where in pending.skips:
        if reason not in _warned_reasons:
            _warned_reasons.add(reason)
            log.warning("skipped a conversation (%s): %s", where or "row", reason)
    for text in pending.notes:
        if text not in _warned_reasons:
            _warned_reasons.add(text)
            log.warning("%s", text)
    from speculators_qwen_compat.data.read.sources import words

    for said in filter(None, map(words, pending.reads)):
        log.warning("%s", said)


@dataclass
class Tally:
    """What a run read and skipped, added up over every process."""

    conversations_in: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    notes: Counter[str] = field(default_factory=Counter)
    quality: QualityStats = field(default_factory=QualityStats)
    #: Conversations that gave at least one row: conversations_in = kept + skipped_total
    #: (+ errors, which are not data problems and fail the run past ERROR_LIMIT).
    kept: int = 0
    errors: int = 0
    first_error: list[str] | None = None  # [where, reason, traceback]
    #: what each --data value was read as (data/read/sources.py ``record``), in order
    reads: list[dict[str, Any]] = field(default_factory=list)

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())

    def add(
        self,
        seen: int,
        skips: list[tuple[str, str]],
        notes: dict[str, int] | None = None,
        quality: dict[str, Any] | None = None,
    ) -> None:
        self.notes.update(notes or {})
        if quality:
            self.quality.merge(quality)
        self.conversations_in += seen
        for reason, where in skips:
            self.skipped[reason] += 1
            examples = self.examples.setdefault(reason, [])
            if len(examples) < EXAMPLES_PER_REASON and where:
                examples.append(where)

    def top_reasons(self, limit: int = 5) -> str:
        return ", ".join(f'{n} x "{reason}"' for reason, n in self.skipped.most_common(limit))

    def warnings(self) -> dict[str, dict[str, Any]]:
        """The data-quality warnings that fire for what this run read (quality.py)."""
        from speculators_qwen_compat.data.account.quality import warnings

        return warnings(self.quality)

    def summary(self) -> str:
        """``skipped N of M conversations: ...; K turns with role 'x' ...; data warnings: ...``"""
        from speculators_qwen_compat.data.account.quality import summary

        line = f"skipped {self.skipped_total} of {self.conversations_in} conversations"
        if self.skipped:
            line += f": {self.top_reasons(len(self.skipped))}"
        for text, count in self.notes.most_common():
            line += f"; {count} {text}"
        if self.errors:
            where, reason, _ = self.first_error or ["", "", ""]
            line += (
                f"; {self.errors} failed with an error that is not a data problem "
                f"(first at {where or 'a row'}: {reason})"
            )
        from speculators_qwen_compat.data.read.sources import words

        for record in self.reads:
            said = words(record)
            line += f"; {said}" if said else ""
        warned = summary(self.warnings())
        return f"{line}; {warned}" if warned else line


def make_folder() -> Path:
    """A ledger folder for one run (its options name it, so every map worker writes there),
    owned and swept like a run folder: a killed run's ledger does not stay in /tmp."""
    return run_folders.make(Path(tempfile.gettempdir()), "sqc-ledger-")


def release(folder: Path) -> None:
    run_folders.release(folder)


class Ledger:
    """The counts of one call of upstream's run function in the ledger folder its options name:
    what an earlier call in the same folder wrote is cleared first, and ``close()`` adds it up
    and clears it. The folder is the run's (``fixed_run`` makes and removes it), so a second
    call under the same run counts as the first did."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._clear()

    def _clear(self) -> None:
        for path in Path(self.directory).glob("*.jsonl"):
            path.unlink()

    def tally(self) -> Tally:
        tally = Tally()
        for path in sorted(Path(self.directory).glob("*.jsonl")):
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    record = json.loads(line)
                    tally.add(
                        record["seen"],
                        [tuple(s) for s in record["skips"]],
                        record.get("notes"),
                        record.get("quality"),
                    )
                    tally.kept += record.get("kept", 0)
                    tally.reads += record.get("reads", [])
                    for error in record.get("errors", []):
                        tally.errors += 1
                        if tally.first_error is None or (error[2] and not tally.first_error[2]):
                            tally.first_error = error
        return tally

    def close(self) -> Tally:
        tally = self.tally()
        self._clear()
        return tally
