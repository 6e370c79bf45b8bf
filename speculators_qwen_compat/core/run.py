"""One prepare_data run as its stages see it (``Run``): the options fixed when it began, its ledger,
its outcome, the dataset its builder maps to disk. The entry point opens it before upstream
starts (``fixed_run``); in map workers it is the copy they were forked with. With the open batch
(data/account/ledger.py) it is one of the package's two context variables."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

from speculators_qwen_compat.core import run_options
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


@contextmanager
def fixed_run(announce: bool = True, **options: Any) -> Iterator[Run]:
    """The run's options fixed once, before upstream starts: the inherited ones with ``options``
    and a ledger folder of the run's own, for this process and the processes it starts
    (core/run_options.py), put back when the block ends; the run open for the block. The one
    place options are fixed: by the entry point, or for a run without one (a user's script,
    upstream's own command) at the start of upstream's run function (data/account/run.py)."""
    from speculators_qwen_compat.data.account import ledger  # the folder's owner and sweeper

    folder = ledger.make_folder()
    before = run_options.fix(replace(current_options(), ledger_dir=str(folder), **options))
    try:
        with running(announce) as run:
            yield run
    finally:
        run_options.restore(before)
        ledger.release(folder)
