"""Fix: a run ends with what it read and skipped, and never with a silently empty dataset.

Targets: ``load_and_preprocess_dataset`` (the ledger, the counts, no row left a CompatError),
``save_token_frequency_distribution`` (limits checked before it writes) and ``_visualize_sample``
(<= 0.6's IndexError on an empty dataset); docs/upstream.md, "Run report".
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from speculators_qwen_compat.core.errors import DEBUG_ENV, CompatError, DataError
from speculators_qwen_compat.core.fix import Fix, Patcher
from speculators_qwen_compat.core.targets import Found, ReleaseRange, Shape, Target
from speculators_qwen_compat.core.upstream import CLI_PREPARE_DATA, PREPROCESSING, bind
from speculators_qwen_compat.data.account.ledger import Ledger, Tally
from speculators_qwen_compat.data.render.render_faults import RenderServerFailed
from speculators_qwen_compat.fixes import route

log = logging.getLogger("speculators_qwen_compat")


@dataclass
class RunOutcome:
    """What a run read, skipped and kept."""

    tally: Tally
    rows_out: int


@dataclass
class Report:
    """A caller's handle on the run made inside ``reporting()``: ``outcome`` is set when the
    run ends (None: upstream stopped before it). ``announce``: the run logs its summary line
    (the prepare_data entry point prints it last itself instead)."""

    announce: bool = True
    outcome: RunOutcome | None = None


#: The caller's Report for runs made in this call (``reporting``); the run's ledger while the
#: run is open (``_run``: upstream's token-frequency and sample steps inside it read it). Both
#: travel with the call and are put back when it returns, so nothing outlives a run.
_report: ContextVar[Report | None] = ContextVar("speculators_qwen_compat_report", default=None)
_ledger: ContextVar[Ledger | None] = ContextVar("speculators_qwen_compat_ledger", default=None)


@contextmanager
def reporting(announce: bool = True) -> Iterator[Report]:
    """Runs made inside hand their outcome to the Report yielded (the last run's wins)."""
    report = Report(announce)
    token = _report.set(report)
    try:
        yield report
    finally:
        _report.reset(token)


RUN = Target(PREPROCESSING, "load_and_preprocess_dataset")
#: 0.8+: the name ``speculators.cli.prepare_data`` binds with ``from ... import``.
CLI_RUN = Target(CLI_PREPARE_DATA, "load_and_preprocess_dataset", optional=True)
#: <= 0.6 die on an empty dataset here (IndexError).
VISUALIZE = Target(PREPROCESSING, "_visualize_sample", params=("preprocessed",), optional=True)
#: Every release writes token_freq.pt here, after the map and before returning the dataset.
SAVE_FREQ = Target(PREPROCESSING, "save_token_frequency_distribution", optional=True)


class RunReportFix(Fix):
    name = "run_report"
    summary = "count what a run reads and skips; fail with reasons instead of an empty dataset"
    modules = (PREPROCESSING, CLI_PREPARE_DATA)
    shapes = (
        Shape(
            "load_and_preprocess_dataset reports skips and refuses empty output",
            (RUN, CLI_RUN, VISUALIZE, SAVE_FREQ),
        ),
    )
    applies_on = ReleaseRange("0.5.0", "0.9.0")

    def apply(self, found: Found, patcher: Patcher) -> None:
        if found.here(CLI_RUN):
            if found.get(CLI_RUN) is found.get(RUN):
                # Bound by ``from ... import`` after the preprocessing hook ran: already our
                # wrapper; uninstall() must put the original back here too.
                original = patcher.original_of(*found.owner_and_name(RUN))
                patcher.adopt(*found.owner_and_name(CLI_RUN), original)
            else:
                patcher.wrap(*found.owner_and_name(CLI_RUN), _run)
        if found.here(RUN):
            patcher.wrap(*found.owner_and_name(RUN), _run)
        if found.here(VISUALIZE):
            patcher.wrap(*found.owner_and_name(VISUALIZE), _visualize_sample)
        if found.here(SAVE_FREQ):
            route.wrap(found, patcher, SAVE_FREQ, self.name, _save_token_frequencies)


def _run(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    if _ledger.get() is not None:  # nested call: the outer run counts
        return wrapped(*args, **kwargs)
    ledger = Ledger()
    token = _ledger.set(ledger)
    rows_out = 0
    try:
        result = _counted(wrapped, args, kwargs, ledger)
        dataset = result[0] if isinstance(result, tuple) else result
        rows_out = len(dataset)
        return result
    finally:
        _ledger.reset(token)
        tally = ledger.close()
        report = _report.get()
        if report is not None:
            report.outcome = RunOutcome(tally, rows_out)
        if report is None or report.announce:
            (log.warning if tally.skipped else log.info)("%s", tally.summary())


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


def _save_token_frequencies(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """Upstream saves token frequencies right after the map, before returning the dataset
    (docs/upstream.md, "Token frequencies"): the error limit and --strict-data are checked
    first, so a refused run writes no token_freq.pt, even to an explicit --token-freq-path."""
    ledger = _ledger.get()
    if ledger is not None:
        tally = ledger.tally()
        _refuse_errors(tally)
        _refuse_warnings_if_strict(tally)
    return wrapped(*args, **kwargs)


def _visualize_sample(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    dataset = bind(wrapped, args, kwargs).arguments["preprocessed"]
    if dataset is not None and len(dataset) == 0:
        ledger = _ledger.get()
        raise DataError(_empty_message(ledger.tally() if ledger else Tally()))
    return wrapped(*args, **kwargs)


def _empty_message(tally: Tally) -> str:
    detail = f" ({tally.summary()})" if tally.conversations_in else ""
    return (
        f"no conversation survived preprocessing{detail}; fix the data or the template, "
        "or pass --allow-empty-output where the release has it if an empty dataset is intended"
    )
