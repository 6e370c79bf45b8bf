"""One prepare_data run: its options fixed once (``fixed_run``), upstream's
``load_and_preprocess_dataset`` counted across map workers (ledger.py) and refused before anything
is written when its rows failed past the error limit, none survived, or ``--strict-data`` found a
warning; its outcome set on the run (core/run.py; docs/upstream.md, "Run report")."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from speculators_qwen_compat.core import run_options
from speculators_qwen_compat.core.errors import DEBUG_ENV, CompatError, DataError
from speculators_qwen_compat.core.run import Run, current_run, running
from speculators_qwen_compat.core.run_options import current_options
from speculators_qwen_compat.core.upstream import bind
from speculators_qwen_compat.data.account.ledger import Ledger, Tally, make_folder, release
from speculators_qwen_compat.data.render.render_faults import RenderServerFailed

log = logging.getLogger("speculators_qwen_compat")


@dataclass
class RunOutcome:
    """What a run read, skipped and kept."""

    tally: Tally
    rows_out: int


@contextmanager
def fixed_run(announce: bool = True, **options: Any) -> Iterator[Run]:
    """The run's options fixed once, before upstream starts: the inherited ones with ``options``
    and a ledger folder of the run's own, for this process and the processes it starts
    (core/run_options.py), put back when the block ends; the run open for the block. The one
    place options are fixed: by the entry point, or for a run without one (a user's script,
    upstream's own command) at the start of upstream's run function (``counted``)."""
    asked = replace(current_options(), **options)  # a wrong option name fails here, first
    folder = make_folder()
    before = run_options.fix(replace(asked, ledger_dir=str(folder)))
    try:
        with running(announce) as run:
            yield run
    finally:
        run_options.restore(before)
        release(folder)


def counted(wrapped: Any, args: tuple, kwargs: dict) -> Any:
    """Upstream's run (``load_and_preprocess_dataset``), counted across its map workers in the
    ledger folder its options name; its outcome goes to the run (core/run.py)."""
    opened = current_run()
    if opened is not None and opened.ledger is not None:  # nested call: the outer run counts
        return wrapped(*args, **kwargs)
    with _fixed_run() as run:
        ledger = run.ledger = Ledger(str(run.options.ledger_dir))
        rows_out = 0
        try:
            result = _counted(wrapped, args, kwargs, ledger)
            dataset = result[0] if isinstance(result, tuple) else result
            rows_out = len(dataset)
            return result
        finally:
            run.ledger = None
            tally = ledger.close()
            run.outcome = RunOutcome(tally, rows_out)
            if run.announce:
                (log.warning if tally.skipped else log.info)("%s", tally.summary())


@contextmanager
def _fixed_run() -> Iterator[Run]:
    """The run the entry point opened with its options fixed (a ledger folder among them); a
    run without our entry point (a user's script, upstream's own command through the .pth)
    has them fixed here at its start, before upstream's function runs."""
    opened = current_run()
    if opened is not None and opened.options.ledger_dir:
        yield opened
        return
    with fixed_run() as run:
        yield run


def _counted(wrapped: Any, args: tuple, kwargs: dict, ledger: Ledger) -> Any:
    """Upstream's run, refused (before anything is written where possible) when its rows
    failed past the error limit, none survived, or ``--strict-data`` found a warning."""
    try:
        result = wrapped(*args, **kwargs)
    except RenderServerFailed as exc:  # from a map worker: say how far the run got
        tally = ledger.tally()
        done = tally.kept + tally.skipped_total
        raise RenderServerFailed(
            f"{exc}; {done} conversations were done and nothing was written; start the "
            "server (or fix --render-endpoint) and run again"
        ) from exc
    except ValueError as exc:
        if "No samples remain" in str(exc):
            _refuse_errors(ledger.tally())
            raise DataError(_empty_message(ledger.tally())) from exc
        raise
    _refuse_errors(ledger.tally())
    dataset = result[0] if isinstance(result, tuple) else result
    allow_empty = bind(wrapped, args, kwargs).arguments.get("allow_empty_output")
    if len(dataset) == 0 and not allow_empty:
        raise DataError(_empty_message(ledger.tally()))
    _refuse_warnings_if_strict(ledger.tally())
    return result


#: Conversations that may fail with an error that is not a data problem (a bug in upstream or
#: in this package) before the run is refused: such a row is not a skip (data/account/ledger.py).
ERROR_LIMIT = 3


def _refuse_errors(tally: Tally) -> None:
    """More than ERROR_LIMIT rows raised something that is not the data's fault: fail, naming
    the first (its traceback on stderr with --debug / SPECULATORS_QWEN_COMPAT_DEBUG=1)."""
    if tally.errors <= ERROR_LIMIT or tally.first_error is None:
        return
    import os
    import sys

    where, reason, trace = tally.first_error
    if trace and os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        sys.stderr.write(trace)
    raise CompatError(
        f"{tally.errors} of {tally.conversations_in} conversations failed with an error that "
        f"is not a data problem (a bug in speculators or speculators_qwen_compat, not counted "
        f"as skipped); first at {where or 'a row'}: {reason}"
    )


def _refuse_warnings_if_strict(tally: Tally) -> None:
    """``--strict-data``: a data-quality warning (data/account/quality.py) ends the run, before
    anything is written."""
    from speculators_qwen_compat.data.account import quality

    if quality.strict() and tally.warnings():
        found = quality.summary(tally.warnings())
        raise DataError(f"--strict-data: {found}; the dataset was not written")


def refuse_before_writing() -> None:
    """Upstream saves token frequencies right after the map, before returning the dataset
    (docs/upstream.md, "Token frequencies"): the error limit and --strict-data are checked
    first, so a refused run writes no token_freq.pt, even to an explicit --token-freq-path."""
    run = current_run()
    ledger = run.ledger if run is not None else None
    if ledger is not None:
        tally = ledger.tally()
        _refuse_errors(tally)
        _refuse_warnings_if_strict(tally)


def refuse_empty(dataset: Any) -> None:
    """<= 0.6 die on an empty dataset with an IndexError when they show a sample: say why."""
    if dataset is not None and len(dataset) == 0:
        run = current_run()
        ledger = run.ledger if run is not None else None
        raise DataError(_empty_message(ledger.tally() if ledger else Tally()))


def _empty_message(tally: Tally) -> str:
    detail = f" ({tally.summary()})" if tally.conversations_in else ""
    return (
        f"no conversation survived preprocessing{detail}; fix the data or the template, "
        "or pass --allow-empty-output where the release has it if an empty dataset is intended"
    )
