"""Several entry-point runs in one interpreter: ``batch_main.py CASES.json`` (conftest.run_batch).

Per case (a JSON object): ``module`` (whose ``main(args)`` runs), ``args``, ``log`` (stdout and
stderr as file descriptors 1 and 2 saw them go to ``LOG.out`` and ``LOG.err``: logging's
handlers and tracebacks included), ``cwd`` (or ""), and optional file steps: ``write`` (path ->
text) and ``unlink`` (paths) before the run, ``copy_after`` (path -> copy) after it. Prints one
JSON line last: name -> exit code, as ``sys.exit(main())`` would exit.

Why one interpreter: start-up and the imports of torch, transformers and speculators cost
several seconds of CPU per ``python -m`` run, the bulk of a tiny run. What a case could leave
behind for the next, and how each case starts as a fresh interpreter would:

- put back after every case: the environment, the working directory, ``warnings``' filters
  and its once-per-location memory (``warnings.catch_warnings`` resets both), and context
  variables (each case runs in a copy of the batch's context): the package's run state
  travels with the call that owns it (docs/maintainers.md, "Run state"): the run the entry
  point opens (core/run.py ``running``: its options, ledger and outcome) and the batch being
  counted (data/account/ledger.py ``batch``);
- reset before every case by the package's own function: the reasons the skip ledger logged
  once outside a run (``ledger.forget_logged_reasons``), process-wide as ``warnings``' own;
- the same for every case, so left as they are: the fixes' registry (installed once; every
  case shares the interpreter's ``SPECULATORS_QWEN_COMPAT``), the unknown-role behaviour the
  conversations fix reads from the release's shape, logging handlers (added once and
  idempotently, writing to file descriptors 1 and 2, which each case redirects), and caches
  keyed by their inputs (templates, tokenizers);
"""

from __future__ import annotations

import contextvars
import importlib
import json
import os
import shutil
import sys
import warnings
from typing import Any

from speculators_qwen_compat.cli import frozen_imports


def reset_package_state() -> None:
    """The package's per-run state as a fresh interpreter has it (see the module docstring)."""
    from speculators_qwen_compat.data.account import ledger

    ledger.forget_logged_reasons()


def run_case(case: dict[str, Any]) -> int:
    """One case's file steps and run, its output in its own log files; its exit code."""
    for path, text in case.get("write", {}).items():
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    for path in case.get("unlink", []):
        os.unlink(path)
    main = importlib.import_module(case["module"]).main
    reset_package_state()
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    for fd, suffix in ((1, ".out"), (2, ".err")):
        sink = os.open(case["log"] + suffix, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(sink, fd)
        os.close(sink)
    try:
        with warnings.catch_warnings():
            if case["cwd"]:
                os.chdir(case["cwd"])
            code = contextvars.copy_context().run(main, case["args"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, old in zip((1, 2), saved, strict=True):
            os.dup2(old, fd)
            os.close(old)
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    for source, copy in case.get("copy_after", {}).items():
        if os.path.exists(source):
            shutil.copyfile(source, copy)
    return 0 if code is None else code


def main(argv: list[str]) -> int:
    with open(argv[0], encoding="utf-8") as fh:
        cases = json.load(fh)
    results = {case["name"]: run_case(case) for case in cases}
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    frozen_imports.exit_with(main(sys.argv[1:]))  # as the entry points exit
