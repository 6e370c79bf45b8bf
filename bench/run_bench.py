"""``make bench``: ratios measured side by side, written to bench/RESULTS.md and the README.

Every ratio is the median over rounds of two commands timed next to each other (the order
reversed every other round), as whole subprocesses, on the bundled tiny Qwen3.6-style tokenizer:

1. the entry point against upstream 0.5.0 with only the probe fixed by hand;
2. on 0.9.0, rendering in-process against a loopback vLLM-style /render server in its own
   process (the rows of both outputs must be identical);
3. ``python -c pass`` with the venv-wide .pth active against switched off;
4. one map worker against two;
5. the floor: apply_chat_template over the same conversations in a plain loop, against the
   entry point.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import report
import workloads
from report import Ratio
from timing import Sample, alternate, paired_ratios
from workloads import Setup

OLD, NEW = "0.5.0", "0.9.0"
RESULTS = workloads.BENCH / "RESULTS.md"
README = workloads.ROOT / "README.md"
Samples = dict[str, list[Sample]]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="make bench: ratios measured side by side")
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the prepare_data runs")
    parser.add_argument("--start-rounds", type=int, default=7)
    parser.add_argument("--start-repeat", type=int, default=20, help="interpreters per sample")
    parser.add_argument("--seq-length", type=int, default=2048)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--venvs", type=Path, default=workloads.ROOT / ".venvs")
    parser.add_argument("--no-write", action="store_true", help="only print the table")
    return parser.parse_args(argv)


def measure_old_release(setup: Setup, args: argparse.Namespace, logs: Path) -> Samples:
    print(f"== prepare_data, speculators {OLD}, {args.conversations} conversations", flush=True)
    commands = [
        workloads.entry_point(setup, OLD, "entry-point", args.workers),
        workloads.hand_patched(setup, OLD, "hand-patched", args.workers),
        workloads.entry_point(setup, OLD, "entry-point-1-worker", 1),
        workloads.floor_loop(setup, OLD, "floor-loop"),
    ]
    return alternate(commands, args.rounds, logs)


def measure_rendering(setup: Setup, args: argparse.Namespace, logs: Path) -> Samples:
    print(f"== prepare_data, speculators {NEW}: local vs HTTP rendering", flush=True)
    with workloads.render_server(setup, NEW) as url:
        commands = [
            workloads.entry_point(
                setup,
                NEW,
                "render-local",
                args.workers,
                "--render-endpoint",
                "local",
                phase=workloads.RENDER_PHASE,
            ),
            workloads.entry_point(
                setup,
                NEW,
                "render-http",
                args.workers,
                "--render-endpoint",
                url,
                phase=workloads.RENDER_PHASE,
            ),
        ]
        samples = alternate(commands, args.rounds, logs)
    rows = workloads.compare_rows(setup, NEW, "render-local", "render-http")
    print(f"  both outputs hold the same {rows} rows", flush=True)
    return samples


def measure_start_up(setup: Setup, args: argparse.Namespace, logs: Path) -> Samples:
    print(f"== python -c pass x {args.start_repeat} per sample, speculators {NEW}", flush=True)
    commands = [
        workloads.interpreter_start(setup, NEW, "start-pth-active", True, args.start_repeat),
        workloads.interpreter_start(setup, NEW, "start-pth-off", False, args.start_repeat),
    ]
    return alternate(commands, args.start_rounds, logs)


def ratios_of(samples: Samples, workers: int) -> list[Ratio]:
    def both(numerator: str, denominator: str) -> dict[str, list[float]]:
        return {
            "ratios": paired_ratios(samples, numerator, denominator),
            "cpu_ratios": paired_ratios(samples, numerator, denominator, "cpu"),
        }

    return [
        Ratio(
            f"1. entry point vs hand-patched upstream ({OLD}, {workers} workers)",
            "entry point / hand-patched",
            limit=1.03,
            **both("entry-point", "hand-patched"),
        ),
        Ratio(
            f"2. local vs HTTP rendering ({NEW}, {workers} workers)",
            "`--render-endpoint local` / loopback server",
            paired_ratios(samples, "render-local", "render-http"),
            limit=0.5,
        ),
        Ratio(
            f"2b. the same runs, rendering phase only ({NEW})",
            "map over the conversations, from the runs' log timestamps",
            paired_ratios(samples, "render-local", "render-http", "phase"),
        ),
        Ratio(
            f"3. interpreter start-up ({NEW})",
            "`.pth` active / `SPECULATORS_QWEN_COMPAT=0`",
            limit=1.10,
            **both("start-pth-active", "start-pth-off"),
        ),
        Ratio(
            f"4. scaling ({OLD})",
            f"1 worker / {workers} workers",
            **both("entry-point-1-worker", "entry-point"),
        ),
        Ratio(
            f"5. floor ({OLD})",
            f"plain apply_chat_template loop / entry point ({workers} workers)",
            **both("floor-loop", "entry-point"),
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sqc-bench-") as tmp:
        work = Path(tmp)
        logs = work / "logs"
        logs.mkdir()
        setup = Setup(args.venvs, work, args.conversations, args.seq_length)
        workloads.make_data(setup, NEW)
        samples = {
            **measure_old_release(setup, args, logs),
            **measure_rendering(setup, args, logs),
            **measure_start_up(setup, args, logs),
        }
    minutes = (time.perf_counter() - began) / 60
    about = report.machine(str(args.venvs / NEW / "bin" / "python"))
    note = (
        f"Measured {about}. {args.conversations} well-formed ShareGPT conversations (demo sample "
        f"data), `--seq-length {args.seq_length}`, tokenizer `demo/tiny-qwen36`; median of "
        f"{args.rounds} alternating rounds ({args.start_rounds} rounds of {args.start_repeat} "
        f"interpreters for start-up); CPU = user + system time of the command's processes "
        f"(not counted for HTTP: the server is not the command's child). The run took "
        f"{minutes:.1f} min; details in bench/RESULTS.md."
    )
    body = report.ratio_table(ratios_of(samples, args.workers)) + "\n\n" + note
    print("\n" + body)
    if not args.no_write:
        details = report.seconds_table(samples)
        RESULTS.write_text(
            f"# make bench\n\n{body}\n\n## Seconds per command\n\n{details}\n\n"
            f"{workloads.DESCRIPTION}\n",
            encoding="utf-8",
        )
        report.update_readme(README, body)
        print(f"\nwrote {RESULTS} and the bench section of {README}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
