"""``speculators-qwen-compat acceptance``: flags, the run over each ``--endpoint``, its output.

Why: users compare their drafter, the model's own MTP and no speculation on their own held-out
data through vLLM's own counters, no curl or grep. Endpoints run one after another on the same
prompts (none counts in another's figures); other traffic to a server does count (said below).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from speculators_qwen_compat.acceptance.measure import Result, measure
from speculators_qwen_compat.acceptance.progress import Progress
from speculators_qwen_compat.acceptance.prompts import read_prompts
from speculators_qwen_compat.acceptance.report import as_json, one_line, table
from speculators_qwen_compat.cli.support import run_main
from speculators_qwen_compat.core.errors import CompatError

DEFAULT_ROWS = 200
DEFAULT_MAX_TOKENS = 512
DEFAULT_CONCURRENCY = 8
OTHER_TRAFFIC = (
    "counters are the server's: other requests it served during the run count in its figures"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--endpoint", action="append", required=True,
        help="vLLM's OpenAI server (http://HOST:PORT or .../v1); repeat to compare side by side",
    )  # fmt: skip
    parser.add_argument(
        "--data", required=True,
        help="held-out conversations, any form prepare_data reads; the prompt of each is its "
        "turns before the last assistant turn",
    )  # fmt: skip
    parser.add_argument("--model", default=None, help="the served model name (default: the "
                        "one the server lists)")  # fmt: skip
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS,
                        help=f"conversations to send (default {DEFAULT_ROWS})")  # fmt: skip
    parser.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS,
                        help=f"tokens per reply (default {DEFAULT_MAX_TOKENS})")  # fmt: skip
    parser.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY,
                        help=f"requests in flight (default {DEFAULT_CONCURRENCY})")  # fmt: skip
    parser.add_argument("--json", default=None, help="also write the figures to this new file")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")


def main(args: argparse.Namespace) -> int:
    return run_main(lambda: _run(args, sys.stdout, sys.stderr), args.debug)


def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.rows < 1 or args.max_tokens < 1 or args.concurrency < 1:
        raise CompatError("--rows, --max-tokens and --concurrency must be positive")
    if args.json and Path(args.json).exists():
        raise CompatError(f"--json {args.json} exists: remove it or name a new file")
    if args.json and not Path(args.json).absolute().parent.is_dir():
        raise CompatError(f"--json {args.json}: its folder does not exist")
    read = read_prompts(args.data, args.rows)
    if read.skipped:
        reasons = "; ".join(f"{n} {reason}" for reason, n in read.skipped.most_common())
        print(f"skipped {sum(read.skipped.values())} conversations: {reasons}", file=err)
    results: list[Result] = []
    for endpoint in args.endpoint:
        bar = Progress(endpoint, len(read.prompts), err)
        try:
            result = measure(
                endpoint, read.prompts, args.model, args.max_tokens, args.concurrency,
                tick=bar.tick, warn=bar.note,
            )  # fmt: skip
        except CompatError:
            bar.close()
            if results:  # the endpoints measured before it are kept
                _report(args, read.prompts, results, out)
            raise
        bar.close()
        for kind, counted in (("refused", result.skipped), ("failed", result.failed)):
            if counted:
                why = "; ".join(f"{n} {reason}" for reason, n in counted.most_common())
                print(f"{result.endpoint}: {counted.total()} requests {kind}: {why}", file=err)
        results.append(result)
    _report(args, read.prompts, results, out)
    return 0


def _report(args: argparse.Namespace, prompts: list, results: list[Result], out: TextIO) -> None:
    if args.json:
        figures = {"rows": len(prompts), "max_tokens": args.max_tokens,
                   "endpoints": [as_json(r) for r in results]}  # fmt: skip
        _write_new(Path(args.json), json.dumps(figures, indent=2) + "\n")
    if len(results) == 1 and results[0].increase is None:
        print(one_line(results[0]), file=out)
    else:
        print(table(results), file=out)
        print(OTHER_TRAFFIC, file=out)


def _write_new(target: Path, text: str) -> None:
    """Through a temporary name of its own beside ``target`` (two runs never share one), renamed
    when complete: a reader never sees half a file."""
    handle, partial = tempfile.mkstemp(dir=target.absolute().parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        os.chmod(partial, 0o644)
        os.replace(partial, target)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
