"""The commands the benchmark times, each a whole subprocess the way a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from timing import Command

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
MODEL = ROOT / "speculators_qwen_compat" / "demo" / "tiny-qwen36"
SWITCH = "SPECULATORS_QWEN_COMPAT"

DESCRIPTION = """## The commands

- `entry-point`: `python -m speculators_qwen_compat.prepare_data --model demo/tiny-qwen36 --data
  sharegpt.jsonl --output OUT --seq-length L --num-preprocessing-workers 2` (speculators 0.5.0),
  `entry-point-1-worker` the same with 1 worker.
- `hand-patched`: `bench/hand_patched_upstream.py` with `SPECULATORS_QWEN_COMPAT=0`: upstream's
  `load_and_preprocess_dataset` + `save_to_disk`, as the git-only `scripts/prepare_data.py` does,
  with only `_supports_assistant_mask` replaced by a version that returns False on any error.
- `floor-loop`: `bench/floor_loop.py`: one process, `apply_chat_template(tokenize=True)` over the
  same conversations (already in template form), no datasets, no fixes.
- `render-local` / `render-http`: the entry point on speculators 0.9.0 with
  `--render-endpoint local` / the URL of `bench/loopback_render_server.py` (tests/render_server.py
  in its own process, TCP_NODELAY set as vLLM's server does); their rows are asserted identical.
- `start-pth-active` / `start-pth-off`: `python -c pass` run `--start-repeat` times back to back
  per sample in the 0.9.0 venv, the second with `SPECULATORS_QWEN_COMPAT=0`.

Every prepare_data run starts from an empty output folder and an empty datasets cache. Each
ratio is taken within a round (the two commands ran next to each other, in an order reversed
every other round); the table shows the median of those per-round ratios."""


@dataclass(frozen=True)
class Setup:
    """Where things are: the release venvs, the temp folder, the data and the run's knobs."""

    venvs: Path
    work: Path
    conversations: int
    seq_length: int
    seed: int = 7

    def python(self, release: str) -> str:
        return str(self.venvs / release / "bin" / "python")

    @property
    def sharegpt(self) -> Path:
        return self.work / "data" / "sharegpt.jsonl"

    @property
    def messages(self) -> Path:
        return self.work / "data" / "messages.jsonl"

    def output(self, name: str) -> Path:
        return self.work / "out" / name

    def cache(self, name: str) -> Path:
        return self.work / "cache" / name


def environment(**extra: str) -> dict[str, str]:
    """This environment without our switches, offline, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(SWITCH)}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.update(extra)
    return env


def make_data(setup: Setup, release: str) -> None:
    subprocess.run(
        [
            setup.python(release),
            str(BENCH / "make_data.py"),
            str(setup.sharegpt.parent),
            str(setup.conversations),
            str(setup.seed),
        ],
        env=environment(),
        check=True,
    )


#: speculators 0.8+ log these around the map that renders every conversation.
RENDER_PHASE = ("Deriving loss masks from vLLM render boundaries", r"SAMPLE #0")


def _prepare_run(
    setup: Setup, name: str, argv: list[str], phase: tuple[str, str] | None = None, **env: str
) -> Command:
    """A prepare_data run writing to its own output, with an empty datasets cache each time
    (a first run on new data: upstream's JSON loader cannot reuse an earlier Arrow cache)."""
    output, cache = setup.output(name), setup.cache(name)
    return Command(
        name=name,
        argv=argv,
        env=environment(HF_DATASETS_CACHE=str(cache), **env),
        fresh=(output, cache),
        phase=phase,
    )


def entry_point(
    setup: Setup,
    release: str,
    name: str,
    workers: int,
    *extra: str,
    phase: tuple[str, str] | None = None,
) -> Command:
    """``python -m speculators_qwen_compat.prepare_data`` on the ShareGPT data."""
    argv = [
        setup.python(release),
        "-m",
        "speculators_qwen_compat.prepare_data",
        "--model",
        str(MODEL),
        "--data",
        str(setup.sharegpt),
        "--output",
        str(setup.output(name)),
        "--seq-length",
        str(setup.seq_length),
        "--num-preprocessing-workers",
        str(workers),
        *extra,
    ]
    return _prepare_run(setup, name, argv, phase)


def hand_patched(setup: Setup, release: str, name: str, workers: int) -> Command:
    """Upstream with only the probe fixed by hand, our .pth switched off."""
    argv = [
        setup.python(release),
        str(BENCH / "hand_patched_upstream.py"),
        str(MODEL),
        str(setup.sharegpt),
        str(setup.output(name)),
        str(setup.seq_length),
        str(workers),
    ]
    return _prepare_run(setup, name, argv, **{SWITCH: "0"})


def floor_loop(setup: Setup, release: str, name: str) -> Command:
    """apply_chat_template over the same conversations in one plain loop, no fixes."""
    argv = [setup.python(release), str(BENCH / "floor_loop.py"), str(MODEL), str(setup.messages)]
    return Command(name=name, argv=argv, env=environment(**{SWITCH: "0"}))


def interpreter_start(setup: Setup, release: str, name: str, active: bool, repeat: int) -> Command:
    """``python -c pass`` ``repeat`` times, with the venv-wide .pth active or switched off."""
    env = environment() if active else environment(**{SWITCH: "0"})
    return Command(name=name, argv=[setup.python(release), "-c", "pass"], env=env, repeat=repeat)


@contextmanager
def render_server(setup: Setup, release: str) -> Iterator[str]:
    """The loopback /render server in its own process; yields its URL."""
    process = subprocess.Popen(
        [setup.python(release), str(BENCH / "loopback_render_server.py"), str(MODEL)],
        env=environment(**{SWITCH: "0"}),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError(f"the render server did not start (exit {process.poll()})")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def compare_rows(setup: Setup, release: str, first: str, second: str) -> int:
    """Assert both outputs hold identical rows; returns the row count."""
    result = subprocess.run(
        [
            setup.python(release),
            str(BENCH / "compare_rows.py"),
            str(setup.output(first)),
            str(setup.output(second)),
        ],
        env=environment(**{SWITCH: "0"}),
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        raise SystemExit(f"rows differ between {first} and {second}")
    return int(result.stdout.strip().splitlines()[-1])
