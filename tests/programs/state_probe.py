"""An entry point for batch_main.py's own test (test_batch_main.py): ``main(["dirty"])`` leaves
behind what a run can leave in a process (a run and a counted batch left open, a skip
reason already logged, an environment variable, another working directory, a warnings filter);
``main(["look"])`` warns WARNING again (stderr shows it where filters and the once-per-place
memory are fresh) and prints one JSON line of what it finds, as a fresh interpreter finds it:
``{"run": null, "batch": null, "reason_logged": true, "env": null, "cwd": <the batch's>}``."""

from __future__ import annotations

import json
import logging
import os
import tempfile
import warnings
from typing import Any

from speculators_qwen_compat.core import run
from speculators_qwen_compat.data.account import ledger

REASON = "state_probe's reason"
VARIABLE = "STATE_PROBE_LEFT_BEHIND"
WARNING = "state_probe's warning"
_LEFT_OPEN: list[Any] = []


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _reason_logged() -> bool:
    """Whether a skip outside any run logs its reason (once per process, data/account/ledger.py)."""
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
        _reason_logged()
        for opened in (run.running(announce=False), ledger.batch(1)):
            opened.__enter__()  # never left, as a crash can leave them
            _LEFT_OPEN.append(opened)  # (kept: collecting a generator would leave it)
        _warn()
        warnings.simplefilter("ignore")
        os.environ[VARIABLE] = "1"
        os.chdir(tempfile.gettempdir())
        return 0
    _warn()
    print(
        json.dumps(
            {
                "run": None if run._run.get() is None else "left",
                "batch": None if ledger._open.get() is None else "left",
                "reason_logged": _reason_logged(),
                "env": os.environ.get(VARIABLE),
                "cwd": os.getcwd(),
            }
        )
    )
    return 0
