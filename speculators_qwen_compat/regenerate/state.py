"""The regenerate-responses run in progress in this process: its settings, tally and how it stops.

The run (run.py) opens one around upstream's ``_run``; the fixes read its settings and count into
it. A server fault or a limit sets ``stop`` and the run cancels every worker at once. Outside a
run the counts go to a tally nobody reads and a fault propagates as it was.
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from speculators_qwen_compat.cli import flags
from speculators_qwen_compat.regenerate.tally import BUG, ERROR_LIMIT, RegenTally

#: ``--request-timeout``: seconds one try of one request may take (cli/flags.py)
DEFAULT_REQUEST_TIMEOUT: float = flags.REQUEST_TIMEOUT.default
#: ``--max-consecutive-failures``: this many conversations in a row failed by the server (with
#: the server alive) stop the run
DEFAULT_MAX_CONSECUTIVE: int = flags.MAX_CONSECUTIVE_FAILURES.default


@dataclass
class Settings:
    """The flags the fixes add to upstream's command (regen_run.py), for this process: one
    attribute per flag of cli/flags.py's ``REGENERATE``, named by its ``dest``."""

    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    max_consecutive_failures: int = DEFAULT_MAX_CONSECUTIVE
    #: ``--allow-changed-settings``: ``--resume`` goes on with other generation settings
    allow_changed_settings: bool = False


SETTINGS = Settings()


@dataclass
class RunState:
    tally: RegenTally = field(default_factory=RegenTally)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    #: why the run must end (a server fault, a limit); the first one wins
    stop: str | None = None
    server_fault: bool = False
    first_trace: str = ""
    #: the tokenizer upstream loaded for ``--model`` (found in its detokenizer), else the path
    tokenizer: Any = None
    model: str | None = None
    max_tokens: int | None = None
    endpoint: str = ""
    #: primary ids already in the output (``--resume``)
    seen: set[str] = field(default_factory=set)
    #: conversations failed in a row by the server (reset by any conversation it answers)
    consecutive: int = 0
    #: tool conversations refused, by the server's message; any tool conversation answered
    tool_refusals: dict[str, int] = field(default_factory=dict)
    tools_answered: bool = False
    #: the output could not be written (disk full, ...): the run stops, resumable once there is
    #: room
    write_fault: bool = False
    #: the file object upstream's workers write the rows with (output.RowWriter); it counts
    #: each conversation once its rows are written
    writer: Any = None
    #: the file object they write the errors file with (output.ErrorsWriter)
    errors_writer: Any = None


_current: RunState | None = None


def open_run() -> RunState:
    global _current
    _current = RunState()
    return _current


def close_run() -> None:
    global _current
    _current = None


def current() -> RunState | None:
    return _current


def tally() -> RegenTally:
    return _current.tally if _current is not None else RegenTally()


def end_run(reason: str, server_fault: bool) -> None:
    state = _current
    if state is None:
        return
    if state.stop is None:
        state.stop, state.server_fault = reason, server_fault
    state.wake.set()


async def fault(reason: str) -> None:
    """A server fault: end the run and wait to be cancelled with it. Returns at once when no
    run is open (the caller re-raises)."""
    if _current is None:
        return
    end_run(reason, server_fault=True)
    await asyncio.Event().wait()


def counted(primary_id: str, count: Callable[[], None]) -> None:
    """Conversation ``primary_id`` has rows for upstream to write: ``count`` counts it once the
    run's writer has written them (output.RowWriter: never a conversation whose rows are not in
    the file); at once when nothing of ours writes them (a fix used on its own)."""
    if _current is not None and _current.writer is not None:
        _current.writer.expect(primary_id, count)
    else:
        count()


def write_failed(path: Any, exc: OSError) -> None:
    """The output could not be written: the run ends at once, resumable (the conversation whose
    rows were lost was never counted: output.RowWriter)."""
    state = _current
    if state is None:
        return
    state.write_fault = True
    end_run(f"cannot write {path}: {exc.strerror or exc}", server_fault=False)


def count_failed(primary_id: str, reason: str) -> None:
    """Conversation ``primary_id`` failed by ``reason``: counted once upstream's worker has
    written its errors record (output.ErrorsWriter); a conversation whose record was never
    written (the run stopped first, the errors file's disk is full) is ``not_reached``, not
    failed: ``--resume`` will run it. At once when nothing of ours writes the records."""
    counts = tally()

    def count() -> None:
        counts.failed[reason] += 1

    if _current is not None and _current.errors_writer is not None:
        _current.errors_writer.expect(primary_id, count)
    else:
        count()


def answered() -> None:
    """The server answered a conversation: the consecutive-failure count starts again."""
    if _current is not None:
        _current.consecutive = 0


def failed_by_server(primary_id: str, reason: str) -> None:
    """A conversation failed by the server while it stayed alive (counted as count_failed
    does); past the limit the run ends."""
    count_failed(primary_id, reason)
    if _current is None:
        return
    _current.consecutive += 1
    limit = SETTINGS.max_consecutive_failures
    if limit and _current.consecutive >= limit:
        end_run(
            f"{_current.consecutive} conversations in a row failed (--max-consecutive-failures "
            f"{limit}); last: {reason}",
            server_fault=True,
        )


def count_error(exc: BaseException, primary_id: str = "") -> None:
    """A conversation failed with something that is not a data problem (counted failed as
    count_failed does); past ERROR_LIMIT the run ends naming the first one."""
    counts = tally()
    counts.errors += 1
    count_failed(primary_id, BUG)
    if not counts.first_error:
        counts.first_error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        if _current is not None:
            _current.first_trace = "".join(traceback.format_exception(exc))
    if counts.errors > ERROR_LIMIT:
        end_run(
            f"{counts.errors} conversations failed with an error that is not a data problem "
            f"(a bug in speculators or speculators_qwen_compat); first: {counts.first_error}",
            server_fault=False,
        )
