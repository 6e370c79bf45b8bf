"""A/B of a speed cut: the same prepare_data command with two versions of this package, side by
side, appended as a dated row to bench/HISTORY.md.

``python bench/ab.py BEFORE AFTER [--release R] [--conversations N] [--rounds K] [-- FLAGS]``
(run with a release's Python, as run_bench.py is: tools/release_python.sh 0.9.0 bench/ab.py).
BEFORE and AFTER are git revisions; ``.`` is the working tree. Each version's package is taken
from git (``git archive``) into a folder put first on PYTHONPATH, so the venv's ``.pth``, the
map workers and every child import that version (checked before timing). Both commands run on
the same data (bench/make_data.py's mix, the real Qwen3.6 vocabulary), in an order reversed
every other round (timing.alternate); their outputs are compared row by row. FLAGS go to
prepare_data (e.g. ``--render-endpoint local``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import workloads
from timing import Command, alternate
from workloads import ROOT, Setup

HISTORY = workloads.BENCH / "HISTORY.md"
PACKAGE = "speculators_qwen_compat"


def parse_args(argv: list[str]) -> argparse.Namespace:
    own, flags = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    )
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", help="git revision, or . for the working tree")
    parser.add_argument("after", help="git revision, or . for the working tree")
    parser.add_argument("--release", default="0.9.0")
    parser.add_argument(
        "--conversations", type=int, default=2_000, help="of bench/make_data.py's mix"
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seq-length", type=int, default=2048)
    parser.add_argument("--vocab", type=Path, default=ROOT / ".venvs" / "assets" / "qwen36-vocab")
    parser.add_argument(
        "--no-write", action="store_true", help=f"print the row, leave {HISTORY.name}"
    )
    args = parser.parse_args(own)
    args.flags = flags
    return args


def git(*argv: str) -> str:
    return subprocess.run(
        ["git", *argv], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()


def label(revision: str) -> str:
    """The commit a version is, as recorded: ``abc1234``, or ``abc1234+changes`` for a working
    tree that differs from its HEAD."""
    if revision != ".":
        return git("rev-parse", "--short", revision)
    dirty = git("status", "--porcelain", "--", PACKAGE)
    return git("rev-parse", "--short", "HEAD") + ("+changes" if dirty else "")


def export(revision: str, folder: Path) -> Path:
    """This package as it is at ``revision`` (``.``: the working tree), under ``folder``."""
    folder.mkdir(parents=True)
    if revision == ".":
        shutil.copytree(
            ROOT / PACKAGE, folder / PACKAGE, ignore=shutil.ignore_patterns("__pycache__")
        )
        return folder
    archive = subprocess.run(
        ["git", "archive", revision, PACKAGE], cwd=ROOT, check=True, capture_output=True
    )
    with tempfile.TemporaryFile() as raw:
        raw.write(archive.stdout)
        raw.seek(0)
        with tarfile.open(fileobj=raw) as tar:
            tar.extractall(folder, filter="data")
    return folder


def with_version(command: Command, source: Path, setup: Setup, release: str) -> Command:
    """``command`` importing the package from ``source``; checked by asking an interpreter of
    the same environment where it imports it from."""
    env = {
        **command.env,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(source), command.env.get("PYTHONPATH")])),
    }
    where = subprocess.run(
        [*setup.python(release), "-c", f"import {PACKAGE}; print({PACKAGE}.__file__)"],
        env=env, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    if not Path(where).is_relative_to(source):
        raise SystemExit(f"ab.py: the command imports {PACKAGE} from {where}, not from {source}")
    return dataclasses.replace(command, env=env)


def row(
    args: argparse.Namespace,
    names: tuple[str, str],
    labels: tuple[str, str],
    samples: dict,
    rows: str,
) -> str:
    before, after = (samples[name] for name in names)
    cpu = [[f"{s.cpu:.2f}" for s in runs] for runs in (before, after)]
    ratio = statistics.median(b.cpu for b in after) / statistics.median(a.cpu for a in before)
    flags = " ".join(args.flags)
    command = (f"prepare_data {args.release}, {args.conversations:,} mixed, {args.workers} workers"
               + (f", `{flags}`" if flags else ""))  # fmt: skip
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    seconds = [", ".join(runs) for runs in cpu]
    cells = [when, *labels, command, str(args.rounds), *seconds, f"{ratio:.3f}", rows, load]
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    labels = (label(args.before), label(args.after))
    with tempfile.TemporaryDirectory(prefix="sqc-ab-") as tmp:
        work = Path(tmp)
        setup = Setup(ROOT, work, args.seq_length)
        logs = work / "logs"
        logs.mkdir()
        print(
            f"== data: {args.conversations} mixed conversations; {labels[0]} -> {labels[1]}",
            flush=True,
        )
        workloads.make_model(setup, args.vocab)
        workloads.make_data(setup, args.release, "mix", "mix", args.conversations)
        names = ("before", "after")
        commands = [
            with_version(
                workloads.entry_point(setup, args.release, name, "mix", args.workers, *args.flags),
                export(revision, work / "src" / name), setup, args.release,
            )
            for name, revision in zip(names, (args.before, args.after), strict=True)
        ]  # fmt: skip
        samples = alternate(commands, args.rounds, logs)
        rows = workloads.compare_rows(setup, args.release, *names)
    line = row(args, names, labels, samples, rows)
    print(line)
    if not args.no_write:
        with HISTORY.open("a", encoding="utf-8") as history:
            history.write(line + "\n")
        print(f"appended to {HISTORY}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
