"""An entry point for batch_main.py's own test (test_batch_main.py): ``main(["dirty"])`` leaves
behind what a run can leave in a process (a last run, the summary switched off, a skip reason
already logged, an environment variable, another working directory, a warnings filter);
``main(["look"])`` warns WARNING again (stderr shows it where filters and the once-per-place
memory are fresh) and prints one JSON line of what it finds, as a fresh interpreter finds it:
``{"last_run": null, "announce": true, "reason_logged": true, "env": null, "cwd": <the
batch's>}``."""

from __future__ import annotations

import json
import logging
import os
import tempfile
import warnings

from speculators_qwen_compat.data import ledger
from speculators_qwen_compat.fixes.data import run_report

REASON = "state_probe's reason"
VARIABLE = "STATE_PROBE_LEFT_BEHIND"
WARNING = "state_probe's warning"


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _reason_logged() -> bool:
    """Whether a skip outside any run logs its reason (once per process, data/ledger.py)."""
    lines = _Lines()
    logger = logging.getLogger("speculators_qwen_compat")
    logger.addHandler(lines)
    try:
        ledger.skip(REASON)
    finally:
        logger.removeHandler(lines)
    return any(REASON in line for line in lines.lines)


def _warn() -> None:
    """A warning from one place: shown once per process unless filtered (stderr shows it)."""
    warnings.warn(WARNING, UserWarning, stacklevel=1)


def main(argv: list[str]) -> int:
    if argv == ["dirty"]:
        run_report.last_run = run_report.RunOutcome(ledger.Tally(), 1)
        run_report.announce = False
        _reason_logged()
        _warn()
        warnings.simplefilter("ignore")
        os.environ[VARIABLE] = "1"
        os.chdir(tempfile.gettempdir())
        return 0
    _warn()
    print(
        json.dumps(
            {
                "last_run": None if run_report.last_run is None else "left",
                "announce": run_report.announce,
                "reason_logged": _reason_logged(),
                "env": os.environ.get(VARIABLE),
                "cwd": os.getcwd(),
            }
        )
    )
    return 0
