"""``make bench``'s regenerate-responses part: our entry point against upstream's command (the
fixes off) on the same stand-in server (tests/regen_stand_in.py, in a process of its own: its
CPU is not the client's; each prompt rendered by the model's own template, fixed replies).

- the request loop: CPU (user + system of the client's process tree, /proc) per request,
  sampled every 0.1 s beside the requests the server answered (its ``/stats``): the CPU
  between the first request answered and the last, over the requests in between (start-up,
  imports and the tokenizer load are outside); the two commands alternate, the order reversed
  every round, and the ratio is ours / upstream's within each round;
- peak memory (summed PSS of the client's process tree, every 0.2 s) on conversations with one
  1 MB message.

``tools/release_python.sh 0.9.0 bench/regen_loop.py [--doc] [--rounds N] [MODEL_DIR]`` runs it
alone (the demo's tokenizer when no model folder is given); ``bench/run_bench.py`` runs it on the
bench's Qwen3.6 folder with the real vocabulary. ``--doc`` writes docs/regenerate-responses.md's
``regen-bench`` block. ``ROUNDS`` is even: each command runs first in half of the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(BENCH))

from timing import _children_of, tree_pss  # noqa: E402
from workloads import SWITCH, environment  # noqa: E402

DOC = ROOT / "docs" / "regenerate-responses.md"
TICKS = os.sysconf("SC_CLK_TCK")
ENTRY = ("-m", "speculators_qwen_compat.regenerate_responses")
UPSTREAM = ("-m", "speculators", "regenerate-responses")
#: rounds of the two commands (the order reversed every other round); the CPU ratio of one
#: round moves by 0.1-0.3 on a shared machine, so the median needs more than three
ROUNDS = 6
WORDS = [
    "the",
    "model",
    "returns",
    "a",
    "list",
    "of",
    "values",
    "from",
    "each",
    "request",
    "and",
    "the",
    "server",
    "keeps",
    "state",
    "for",
    "every",
    "user",
    "while",
    "tests",
    "check",
    "that",
    "results",
    "match",
    "what",
    "we",
    "expected",
    "before",
    "deployment",
]


def conversations(count: int, seed: int = 7) -> list[dict]:
    """70% one exchange, 30% three user turns; a few hundred words each (OpenAI messages)."""
    pick = random.Random(seed)

    def text() -> str:
        return " ".join(pick.choice(WORDS) for _ in range(pick.randint(40, 300)))

    rows = []
    for index in range(count):
        turns = 1 if pick.random() < 0.7 else 3
        messages = [{"role": "system", "content": "You are a helpful assistant."}]
        for _ in range(turns):
            messages += [{"role": "user", "content": text()},
                         {"role": "assistant", "content": "OK."}]  # fmt: skip
        rows.append({"id": f"c{index}", "messages": messages})
    return rows


def long_messages(count: int, size: int) -> list[dict]:
    """``count`` conversations of one user message of ``size`` bytes."""
    word = "memory "
    return [{"id": f"long{i}", "messages": [{"role": "user", "content": word * (size // 7)}]}
            for i in range(count)]  # fmt: skip


def write(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@contextmanager
def stand_in(python: list[str], model: Path, work: Path) -> Iterator[str]:
    """The stand-in server in a process of its own; its URL."""
    port_file = work / "stand-in.url"
    server = subprocess.Popen(
        [*python, str(ROOT / "tests" / "regen_stand_in.py"), str(model), str(port_file)],
        env=environment(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not port_file.exists() and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if not port_file.exists():
            raise RuntimeError("the stand-in server did not start")
        yield port_file.read_text().strip()
    finally:
        server.terminate()
        server.wait(timeout=30)


def answered(url: str) -> int:
    with urllib.request.urlopen(url + "/stats", timeout=30) as response:
        return int(json.loads(response.read())["requests"])


def command(python: list[str], who: str, url: str, model: Path, data: Path,
            out: Path) -> tuple[list[str], dict[str, str]]:  # fmt: skip
    argv = [
        *python, *(ENTRY if who == "ours" else UPSTREAM), "--endpoint",
        url + "/v1/chat/completions", "--model", str(model), "--dataset", str(data),
        "--outfile", str(out / "out.jsonl"), "--concurrency", "16",
    ]  # fmt: skip
    return argv, environment(**({SWITCH: "0"} if who == "upstream" else {}))


@dataclass
class Loop:
    """One run: its request loop's CPU per request, its wall time and its peak memory."""

    cpu_per_request: float  # seconds
    requests: int
    wall: float
    peak_pss: int


def tree_cpu(root: int) -> float:
    """CPU seconds (user + system) of ``root`` and its descendants so far."""
    children = _children_of()
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, ()))
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def run_loop(argv: list[str], env: dict[str, str], url: str, out: Path, log: Path) -> Loop:
    """Run one command, sampling every 0.1 s its process tree's CPU and the requests the server
    answered: the loop's CPU per request is the CPU between the first sample after a request was
    answered and the last sample at which one was, over the requests answered in between (the
    start-up, the tokenizer load and the end are outside the window)."""
    shutil.rmtree(out, ignore_errors=True)
    base = answered(url)
    points: list[tuple[float, int]] = []
    peak = 0
    start = time.perf_counter()
    with log.open("wb") as err:
        process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err)
        while process.poll() is None:
            cpu, asked = tree_cpu(process.pid), answered(url) - base
            peak = max(peak, tree_pss(process.pid)[0])
            points.append((cpu, asked))
            time.sleep(0.1)
    wall = time.perf_counter() - start
    if process.returncode != 0:
        raise RuntimeError(f"{argv} exited with {process.returncode}: {log.read_text()[-2000:]}")
    asked = answered(url) - base
    moving = [(cpu, n) for cpu, n in points if n > 0]
    first = moving[0] if moving else (0.0, 0)
    last = next((p for p in moving if p[1] == moving[-1][1]), first) if moving else first
    per_request = (last[0] - first[0]) / (last[1] - first[1]) if last[1] > first[1] else 0.0
    return Loop(per_request, asked, wall, peak)


def measure(python: list[str], model: Path, work: Path, *, count: int = 2000, rounds: int = ROUNDS,
            long_count: int = 3, long_size: int = 1 << 20) -> dict[str, list[float]]:  # fmt: skip
    """Per round: CPU ms per request of each command's loop, its wall time and requests, and
    the peak MB on long messages."""
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    full = write(work / "data" / "loop.jsonl", conversations(count))
    big = write(work / "data" / "long.jsonl", long_messages(long_count, long_size))
    figures: dict[str, list[float]] = {}
    with stand_in(python, model, work) as url:
        for index in range(rounds):
            order = ["ours", "upstream"] if index % 2 == 0 else ["upstream", "ours"]
            for who in order:
                runs = {}
                for data in (full, big):
                    out = work / "out" / f"{who}-{data.stem}"
                    argv, env = command(python, who, url, model, data, out)
                    runs[data.stem] = run_loop(argv, env, url, out, logs / f"{who}-{data.stem}.log")
                loop, long = runs["loop"], runs["long"]
                figures.setdefault(f"{who} cpu ms/request", []).append(loop.cpu_per_request * 1e3)
                figures.setdefault(f"{who} wall s", []).append(loop.wall)
                figures.setdefault(f"{who} requests", []).append(loop.requests)
                figures.setdefault(f"{who} peak MB", []).append(long.peak_pss / 1e6)
                print(f"  round {index + 1}/{rounds} {who:<9} {loop.cpu_per_request * 1e3:6.2f} "
                      f"ms CPU/request ({loop.requests} requests, {loop.wall:.1f} s wall), "
                      f"long messages: {long.peak_pss / 1e6:.0f} MB peak", flush=True)  # fmt: skip
    return figures


def table(figures: dict[str, list[float]], count: int, long_count: int) -> str:
    """The block: medians and the paired ratios (ours / upstream within each round)."""

    def median(name: str) -> float:
        return statistics.median(figures[name])

    def ratios(name: str) -> str:
        pairs = zip(figures[f"ours {name}"], figures[f"upstream {name}"], strict=True)
        values = [a / b for a, b in pairs if b]
        return ", ".join(f"{v:.2f}" for v in values) + f" (median {statistics.median(values):.2f})"

    lines = [
        "| measure | ours | upstream | ours / upstream, per round |",
        "|---|---|---|---|",
        f"| request loop, CPU per request ({count:,} conversations) | "
        f"{median('ours cpu ms/request'):.2f} ms | {median('upstream cpu ms/request'):.2f} ms | "
        f"{ratios('cpu ms/request')} |",
        f"| request loop, wall ({count:,} conversations) | {median('ours wall s'):.1f} s | "
        f"{median('upstream wall s'):.1f} s | {ratios('wall s')} |",
        f"| peak memory, {long_count} conversations of one 1 MB message | "
        f"{median('ours peak MB'):.0f} MB | {median('upstream peak MB'):.0f} MB | "
        f"{ratios('peak MB')} |",
    ]
    return "\n".join(lines)


def block(figures: dict[str, list[float]], count: int, long_count: int, about: str) -> str:
    requests = int(statistics.median(figures["ours requests"]))
    rounds = len(figures["ours requests"])
    return (
        f"Written by `make bench` (bench/regen_loop.py), {about}: our entry point and upstream's "
        f"command (fixes off), speculators 0.9.0, `--concurrency 16`, against the stand-in "
        f"server (tests/regen_stand_in.py, its own process) rendering each prompt with the "
        f"model's template; {rounds} rounds, the order reversed every other round. CPU per "
        f"request = the client's CPU (user + system, its process tree) from the first request "
        f"answered to the last, sampled every 0.1 s, over the requests answered in between "
        f"({requests:,} in a run): the loop without the start-up. Wall = the whole run. Peak "
        f"memory = the largest summed PSS of the client's process tree.\n\n"
        f"{table(figures, count, long_count)}"
    )


def main(argv: list[str]) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from speculators_qwen_compat import demo

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", help="model folder (default: the demo tokenizer)")
    parser.add_argument("--doc", action="store_true", help="write the regen-bench block")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args(argv)
    python = [str(ROOT / "tools" / "release_python.sh"), "0.9.0"]
    with tempfile.TemporaryDirectory(prefix="regen-loop-") as scratch:
        work = Path(scratch)
        model = Path(args.model) if args.model else demo.write_model(work / "model", "qwen36")
        figures = measure(python, model, work, rounds=args.rounds)
    about = f"model {'the demo tokenizer' if not args.model else model.name}"
    text = block(figures, 2000, 3, about)
    print("\n" + text)
    if args.doc:
        import doc_block

        doc_block.write(DOC, "regen-bench", text)


if __name__ == "__main__":
    main(sys.argv[1:])
