"""``speculators-qwen-compat acceptance``: flags, the run over each ``--endpoint``, its output.

Why: users compare their drafter, the model's own MTP and no speculation on their own held-out
data through vLLM's own counters, no curl or grep. Endpoints run one after another on the same
prompts (none counts in another's figures); other traffic to a server does count (said below).
"""

from __future__ import annotations

import argparse
import json
import sys
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
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")


def main(args: argparse.Namespace) -> int:
    return run_main(lambda: _run(args, sys.stdout, sys.stderr), args.debug)


def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.rows < 1 or args.max_tokens < 1 or args.concurrency < 1:
        raise CompatError("--rows, --max-tokens and --concurrency must be positive")
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
        finally:
            bar.close()
        results.append(result)
    if args.json:
        figures = {"rows": len(read.prompts), "max_tokens": args.max_tokens,
                   "endpoints": [as_json(r) for r in results]}  # fmt: skip
        target = Path(args.json)
        partial = target.with_name(target.name + ".partial")  # complete when it appears
        partial.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        partial.replace(target)
    if len(results) == 1 and results[0].increase is None:
        print(one_line(results[0]), file=out)
    else:
        print(table(results), file=out)
        print(OTHER_TRAFFIC, file=out)
    return 0
