"""The regenerate-responses run in progress in this process: its tally and how it is stopped.

The run fix (fixes/regenerate/regen_run.py) opens one around upstream's ``_run``; the other
fixes count into it. A server fault or the error limit sets ``stop`` and wakes the run, which
cancels every worker at once (upstream's workers would otherwise write each remaining
conversation into the errors file, one retry budget after another). Outside a run (a fix used on
its own) the counts go to a tally nobody reads and a fault propagates as the exception it was.
"""

from __future__ import annotations

import asyncio
import traceback
from dataclasses import dataclass, field

from speculators_qwen_compat.data.regen_tally import ERROR_LIMIT, RegenTally


@dataclass
class RunState:
    tally: RegenTally = field(default_factory=RegenTally)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    #: why the run must end (a server fault, the error limit); the first one wins
    stop: str | None = None
    server_fault: bool = False
    first_trace: str = ""
    #: the tokenizer path upstream loads (``--model``), whose template rows are checked against
    model: str | None = None
    max_tokens: int | None = None
    #: primary ids already in the output (``--resume``)
    seen: set[str] = field(default_factory=set)


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


def count_error(exc: BaseException) -> None:
    """A conversation failed with something that is not a data problem; past ERROR_LIMIT the
    run ends naming the first one."""
    counts = tally()
    counts.errors += 1
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
