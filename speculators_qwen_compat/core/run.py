"""One prepare_data run as its stages see it (``Run``): the options fixed when it began, its ledger,
its outcome, the dataset its builder maps to disk. Opened by data/account/run.py ``fixed_run``
(``running``, where no run is open, by others); in map workers it is the copy they were forked
with. With the open batch (data/account/ledger.py) it is one of the two context variables."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from speculators_qwen_compat.core.run_options import RunOptions, current_options


@dataclass
class Run:
    """``announce``: the run logs its summary (the prepare_data entry point prints it last
    itself instead). ``ledger``: the skip ledger while upstream's run function runs;
    ``outcome``: what it read, skipped and kept, set when it ends (None: upstream stopped
    before it); ``to_disk``: the id of the dataset whose builder's one map writes to disk."""

    options: RunOptions
    announce: bool = True
    ledger: Any = None
    outcome: Any = None
    to_disk: int | None = None


_run: ContextVar[Run | None] = ContextVar("speculators_qwen_compat_run", default=None)


@contextmanager
def running(announce: bool = True) -> Iterator[Run]:
    """A run open for the block, with this process's options as fixed now; a run already open
    is that one."""
    opened = _run.get()
    if opened is not None:
        yield opened
        return
    opened = Run(current_options(), announce)
    token = _run.set(opened)
    try:
        yield opened
    finally:
        _run.reset(token)


def current_run() -> Run | None:
    """The run open in this call (or the one a map worker was forked with), if any."""
    return _run.get()
