"""prepare_data with a fault placed at an exact point, for tests/test_fault_runs.py.

``python fault_driver.py RUNS_JSON``: RUNS_JSON is a list of runs, each ``{"args": [...],
"kill_at": POINT or null, "bug": MARKER or null}``, made one after the other in this interpreter
(prepare_data's ``main``); prints their exit codes as one JSON list.

- ``kill_at`` SIGKILLs this process's whole process group (the run and its map workers, as an
  out-of-memory kill or ``kill -9 -PGID`` would) at a point that needs no timing:
  ``before-map`` when ``datasets.Dataset.map`` is first called on the rows, ``during-map`` when
  a map worker has counted its first batch (the ledger's first flush, 1,000 rows in, upstream's
  map batch size), ``after-map`` when ``save_to_disk`` has written the whole dataset, before
  the entry point puts it in place; ``commit-before-swap``/``commit-after-swap`` when an
  --overwrite run puts its dataset in place of the old one, just before and just after the
  swap. The process must lead its own process group.
- ``bug`` makes ``apply_chat_template`` raise ``RuntimeError`` on conversations holding the
  marker: an error that is not a data problem (a bug), for the error limit.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any


def kill_everything() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.killpg(0, signal.SIGKILL)


def place_kill(point: str) -> None:
    if os.getpgid(0) != os.getpid():
        raise SystemExit("fault_driver: start me as a process group leader (start_new_session)")
    from datasets import Dataset

    if point == "before-map":
        original_map = Dataset.map

        def map_then_die(self: Any, *args: Any, **kwargs: Any) -> Any:
            kill_everything()
            return original_map(self, *args, **kwargs)

        Dataset.map = map_then_die
    elif point == "during-map":
        from speculators_qwen_compat.core.run_options import current_options
        from speculators_qwen_compat.data.account import ledger

        original_write = ledger._write

        def write_then_die(pending: Any) -> None:
            original_write(pending)
            if pending.seen and current_options().ledger_dir:
                kill_everything()

        ledger._write = write_then_die
    elif point == "after-map":
        original_save = Dataset.save_to_disk

        def save_then_die(self: Any, *args: Any, **kwargs: Any) -> Any:
            original_save(self, *args, **kwargs)
            kill_everything()

        Dataset.save_to_disk = save_then_die
    elif point in ("commit-before-swap", "commit-after-swap"):
        from speculators_qwen_compat.cli import staged_output

        original_exchange = staged_output.exchange

        def exchange_and_die(first: Any, second: Any) -> bool:
            if point == "commit-before-swap":
                kill_everything()
            swapped = original_exchange(first, second)
            kill_everything()
            return swapped

        staged_output.exchange = exchange_and_die
    else:
        raise SystemExit(f"fault_driver: unknown kill point {point!r}")


def main() -> int:
    from batch_main import reset_package_state  # beside this program, on sys.path
    from inject_tokenizer_bug import inject_bug

    from speculators_qwen_compat.cli.prepare_data import main as prepare_data

    codes = []
    for run in json.loads(sys.argv[1]):
        if run.get("kill_at"):
            place_kill(run["kill_at"])
        if run.get("bug"):
            inject_bug(run["bug"])
        reset_package_state()  # each run starts as a run of its own would (batch_main's reset)
        codes.append(prepare_data(run["args"]))
    print(json.dumps(codes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
