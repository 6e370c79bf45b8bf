"""``make bench``: speed and memory measured side by side in one run, written to
bench/RESULTS.md and docs/maintainers.md (tools/doc_block.py).

Every command is a whole subprocess run the way a user runs it (release Pythons through
tools/release_python.sh), on a Qwen3.6 model folder with the real vocabulary (.venvs/assets,
tools/build_qwen_vocab.py) and data from bench/make_data.py. Ratios are taken between commands
that ran next to each other (the order reversed every other round):

0. the user's job at full size: the entry point on 0.9.0 with ``--render-endpoint local`` over
   the whole mix (200,000 conversations by default): conversations/s, tokens/s, peak memory;
1. the entry point against upstream with only the hand fix a user needs, per upstream generation,
   on a slice of the mix: 0.5.0 (0.5-0.7, local rendering) and 0.9.0 (0.8+, both through the
   real vLLM render server, which renders one request at a time);
2. on 0.9.0, ``--render-endpoint local`` against the real vLLM render server on that slice
   (rows identical); and on an image slice (bench/make_images.py: a few hundred conversations
   with generated PNGs by path, the composite checkpoint, the vision base), the same pair
   (rows identical, ``messages`` included);
3. memory: peak PSS of the whole process tree, entry point and hand-patched 0.5.0, on short
   chats at 100,000 and 1,000,000 conversations (identical rows, so their times compare too);
4. ``python -c pass`` with the .pth active against switched off;
5. the floor: apply_chat_template over the slice in a plain loop, against the entry point;
6. the peer: SpecForge 0.2.0's data preparation (bench/peer_specforge.py) against the entry
   point on 0.9.0 with ``--render-endpoint local``, on the slice (CPU, wall, the assistant
   spans each supervises), beside 0.9.0's floor (bench/floor_rows.py: the same rows in a plain
   loop); and both on the slice's head with one bad row (a template
   rejection; tool-call arguments that are not valid JSON): what each does with it.
7. regenerate-responses (bench/regen_loop.py): our entry point against upstream's command on
   the same stand-in server: CPU per request of the request loop, peak memory on 1 MB messages;
   written to docs/regenerate-responses.md's ``regen-bench`` block.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import report
import workloads
from report import Ratio, Run, doc_block  # doc_block: tools/doc_block.py, put on the path by report
from timing import Sample, alternate, paired_ratios
from workloads import Setup

#: The oldest and newest tested releases, the bench's release of each upstream generation (route/):
#: script (<= 0.7) and render (0.8+).
OLD, NEW = "0.5.0", "0.9.0"
ROOT = workloads.ROOT
RESULTS = workloads.BENCH / "RESULTS.md"
Samples = dict[str, list[Sample]]
#: which outputs were compared row by row (compare_rows.py) -> what it found
SAME_ROWS: dict[str, str] = {}
BAD_ROWS: dict[str, dict[str, dict[str, object]]] = {}  # kind -> {"ours"|"SpecForge": outcome}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="make bench: speed and memory side by side")
    parser.add_argument("--conversations", type=int, default=200_000, help="the mix's size")
    parser.add_argument("--slice", type=int, default=2_000, help="the mix's head for ratios")
    parser.add_argument("--memory", default="100000,1000000", help="short-chat sizes, or none")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the prepare_data runs")
    parser.add_argument("--start-rounds", type=int, default=5)
    parser.add_argument("--start-repeat", type=int, default=10, help="interpreters per sample")
    parser.add_argument("--image-slice", type=int, default=300, help="image conversations")
    parser.add_argument("--seq-length", type=int, default=2048)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--vocab", type=Path, default=ROOT / ".venvs" / "assets" / "qwen36-vocab")
    parser.add_argument("--peer-good-rows", type=int, default=200, help="rows beside a bad one")
    parser.add_argument("--only", default="", help="comma-separated parts (memory,mix,render,"
                        "floor,script,start,peer,images,regen); default all")  # fmt: skip
    parser.add_argument("--no-write", action="store_true", help="only print the tables")
    return parser.parse_args(argv)


def memory_sizes(args: argparse.Namespace) -> list[int]:
    return [] if args.memory == "none" else sorted(int(n) for n in args.memory.split(","))


def prepare_inputs(setup: Setup, args: argparse.Namespace) -> None:
    print(f"== data: {args.conversations} mixed conversations, model {setup.model}", flush=True)
    workloads.make_model(setup, args.vocab)
    workloads.make_data(setup, OLD, "mix", "mix", args.conversations)
    workloads.head(setup, "mix", "slice", args.slice)
    workloads.peer_data(setup, "slice")
    sizes = memory_sizes(args)
    if sizes:
        workloads.make_data(setup, OLD, f"chat-{sizes[-1]}", "chat", sizes[-1])
        for size in sizes[:-1]:
            workloads.head(setup, f"chat-{sizes[-1]}", f"chat-{size}", size)


def measure_full_mix(setup: Setup, args: argparse.Namespace, logs: Path) -> Samples:
    print(f"== {NEW}: the whole mix, {args.conversations} conversations, local", flush=True)
    command = workloads.entry_point(setup, NEW, "entry-0.9-mix", "mix", args.workers,
                                    "--render-endpoint", "local")  # fmt: skip
    return alternate([command], 1, logs)


def measure_script_generation(setup: Setup, args: argparse.Namespace, logs: Path) -> Samples:
    print(f"== {OLD}: entry point vs hand-patched, {args.slice} conversations", flush=True)
    commands = [
        workloads.entry_point(setup, OLD, "entry-0.5", "slice", args.workers),
        workloads.hand_patched(setup, OLD, "hand-0.5", "slice", args.workers),
    ]
    return alternate(commands, args.rounds, logs)


def measure_memory(setup: Setup, args: argparse.Namespace, logs: Path) -> Samples:
    samples: Samples = {}
    for size in memory_sizes(args):
        print(f"== {OLD}: peak memory, {size} short chats", flush=True)
        commands = [
            workloads.entry_point(setup, OLD, f"entry-mem-{size}", f"chat-{size}", args.workers),
            workloads.hand_patched(setup, OLD, f"hand-mem-{size}", f"chat-{size}", args.workers),
        ]
        samples.update(alternate(commands, 1, logs))
        label = f"entry point vs hand-patched at {size:,} short chats"
        SAME_ROWS[label] = workloads.compare_rows(
            setup, OLD, f"entry-mem-{size}", f"hand-mem-{size}"
        )
        print(f"  {label}: {SAME_ROWS[label]}", flush=True)
    return samples


def measure_render_generation(setup: Setup, args: argparse.Namespace, logs: Path) -> Samples:
    print(f"== {NEW}: real vLLM render server, {args.slice} conversations", flush=True)
    phase = workloads.RENDER_PHASE
    with workloads.render_server(setup, setup.messages("slice")) as url:
        print(f"  vLLM render server at {url}", flush=True)
        commands = [
            workloads.entry_point(setup, NEW, "entry-0.9-http", "slice", args.workers,
                                  "--render-endpoint", url, phase=phase),
            workloads.hand_patched(setup, NEW, "hand-0.9-http", "slice", args.workers, url),
            workloads.entry_point(setup, NEW, "entry-0.9-local", "slice", args.workers,
                                  "--render-endpoint", "local", phase=phase),
        ]  # fmt: skip
        samples = alternate(commands, args.rounds, logs)
    label = "local vs vLLM rendering"
    SAME_ROWS[label] = workloads.compare_rows(setup, NEW, "entry-0.9-local", "entry-0.9-http")
    print(f"  {label}: {SAME_ROWS[label]}", flush=True)
    return samples


def measure_images(setup: Setup, args: argparse.Namespace, logs: Path) -> Samples:
    count = args.image_slice
    print(f"== {NEW}: image conversations, local vs real vLLM, {count}", flush=True)
    workloads.make_images(setup, count, args.vocab)
    data = workloads.IMAGES
    with workloads.image_render_server(setup) as url:
        print(f"  vLLM render server at {url}", flush=True)
        commands = [
            workloads.entry_point(setup, NEW, "entry-0.9-img-local", data, args.workers,
                                  "--render-endpoint", "local", vision=True),
            workloads.entry_point(setup, NEW, "entry-0.9-img-http", data, args.workers,
                                  "--render-endpoint", url, vision=True),
            workloads.entry_point(setup, NEW, "entry-0.9-img-parquet", data, args.workers,
                                  "--render-endpoint", "local", vision=True,
                                  data_file="train.parquet"),
        ]  # fmt: skip
        samples = alternate(commands, args.rounds, logs)
    label = "local vs vLLM rendering, images"
    SAME_ROWS[label] = workloads.compare_rows(
        setup, NEW, "entry-0.9-img-local", "entry-0.9-img-http"
    )
    print(f"  {label}: {SAME_ROWS[label]}", flush=True)
    label = "parquet inline images vs JSONL paths"
    SAME_ROWS[label] = workloads.compare_rows(
        setup, NEW, "entry-0.9-img-parquet", "entry-0.9-img-local", ids_only=True
    )
    print(f"  {label}: {SAME_ROWS[label]}", flush=True)
    IMAGE_COST.update(workloads.image_cost(setup))
    print(f"  per image at 6000x4000: {IMAGE_COST}", flush=True)
    return samples


#: bench/image_cost.py's figures (the image slice's per-image cost), filled by measure_images
IMAGE_COST: dict[str, dict[str, float]] = {}
IMAGES_PAGE = workloads.ROOT / "docs" / "images.md"


def image_block(samples: Samples, args: argparse.Namespace) -> str:
    """docs/images.md's ``image-bench`` block: the image slice's local / vLLM ratio (2c) and
    the per-image cost of learning an image's size at a large size."""
    wall = paired_ratios(samples, "entry-0.9-img-local", "entry-0.9-img-http")
    cpu = paired_ratios(samples, "entry-0.9-img-local", "entry-0.9-img-http", "cpu")
    parquet_cpu = paired_ratios(samples, "entry-0.9-img-parquet", "entry-0.9-img-local", "cpu")
    parquet_wall = paired_ratios(samples, "entry-0.9-img-parquet", "entry-0.9-img-local")
    label = "local vs vLLM rendering, images"
    cost = IMAGE_COST
    lines = [
        f"Written by `make bench` (`bench/run_bench.py --only images`), {NEW}, "
        f"{args.image_slice:,} image conversations (bench/make_images.py), "
        f"{args.workers} workers, {args.rounds} round(s):",
        "",
        "| measure | value | goal |",
        "|---|---|---|",
        f"| local / vLLM render server, wall (ratio 2c) | {_median(wall)} | <= 0.5 |",
        f"| local / vLLM render server, CPU | {_median(cpu)} | |",
        f"| rows compared | {SAME_ROWS.get(label, 'not compared')} | identical |",
        f"| parquet with inline `Image()` bytes / the same JSONL with paths, local, CPU | "
        f"{_median(parquet_cpu)} | <= 1.2 |",
        f"| parquet / JSONL, wall | {_median(parquet_wall)} | |",
        f"| rows compared (ids and masks) | "
        f"{SAME_ROWS.get('parquet inline images vs JSONL paths', 'not compared')} | identical |",
    ]
    names = {
        "header": "size from the header only (Pillow `open`, EXIF)",
        "ours": "local rendering per new file (header + JPEG checked at 1/8 scale)",
        "decode": "full decode, EXIF applied (vLLM; local rendering before)",
    }
    for method, text in names.items():
        if method in cost:
            lines.append(
                f"| 6000x4000 JPEG, {text} | {cost[method]['ms']:.2f} ms, peak RSS "
                f"{cost[method]['peak_mb']:.0f} MB | |"
            )
    return "\n".join(lines)


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}" if values else "not run"


def measure_floor(setup: Setup, args: argparse.Namespace, logs: Path) -> Samples:
    print(f"== {OLD}: floor, {args.slice} conversations", flush=True)
    commands = [
        workloads.floor_loop(setup, OLD, "floor-loop", "slice"),
        workloads.entry_point(setup, OLD, "entry-0.5-slice", "slice", args.workers),
    ]
    return alternate(commands, args.rounds, logs)


def measure_peer(setup: Setup, args: argparse.Namespace, logs: Path) -> Samples:
    print(f"== {NEW} local vs SpecForge 0.2.0 and the floor, {args.slice}", flush=True)
    commands = [
        workloads.entry_point(setup, NEW, "entry-0.9-vs-peer", "slice", args.workers,
                              "--render-endpoint", "local"),
        workloads.specforge(setup, "specforge", "slice", args.workers),
        workloads.floor_rows(setup, NEW, "floor-rows", "slice"),
    ]  # fmt: skip
    samples = alternate(commands, args.rounds, logs)
    for kind in workloads.BAD_ROWS:
        data = workloads.bad_rows_data(setup, "slice", kind, args.peer_good_rows)
        ours = workloads.entry_point(setup, NEW, f"ours-{data}", data, args.workers,
                                     "--render-endpoint", "local")  # fmt: skip
        peer = workloads.specforge(setup, f"peer-{data}", data, args.workers)
        BAD_ROWS[kind] = {
            "ours": workloads.outcome(ours, setup, NEW, logs / f"ours-{data}.log"),
            "SpecForge": workloads.outcome(peer, setup, NEW, logs / f"peer-{data}.log"),
        }
        print(f"  {kind}: {BAD_ROWS[kind]}", flush=True)
    return samples


def measure_regen(setup: Setup, args: argparse.Namespace, logs: Path) -> Samples:
    """regenerate-responses against upstream's on the stand-in server (bench/regen_loop.py):
    its own block of docs/regenerate-responses.md, no ratio of the prepare_data tables."""
    import regen_loop

    print(f"== {NEW}: regenerate-responses request loop and peak memory", flush=True)
    work = setup.work / "regen"
    figures = regen_loop.measure(setup.python(NEW), setup.model, work)
    about = (
        f"{report.machine(setup.python(NEW))}; model: the bench's Qwen3.6 folder (real vocabulary)"
    )
    text = regen_loop.block(figures, 2000, 3, about)
    print("\n" + text, flush=True)
    if not args.no_write:
        doc_block.write(regen_loop.DOC, "regen-bench", text)
    return {}


def measure_start_up(setup: Setup, args: argparse.Namespace, logs: Path) -> Samples:
    print(f"== python -c pass x {args.start_repeat} per sample, speculators {NEW}", flush=True)
    commands = [
        workloads.interpreter_start(setup, NEW, "start-pth-active", True, args.start_repeat),
        workloads.interpreter_start(setup, NEW, "start-pth-off", False, args.start_repeat),
    ]
    # the commands a user starts first, beside upstream's own CLI start-up
    commands += [
        workloads.module_start(setup, NEW, name, argv, 1)
        for name, argv in (
            ("upstream-help", ["-m", "speculators", "--help"]),
            ("status", ["-m", "speculators_qwen_compat", "status"]),
            ("prepare-help", ["-m", "speculators_qwen_compat.prepare_data", "--help"]),
        )
    ]
    return alternate(commands, args.start_rounds, logs)


RUNS = {
    # name: (release, data, what)
    "entry-0.9-mix": (NEW, "mix", "entry point, `--render-endpoint local`, the whole mix"),
    "entry-0.5": (OLD, "slice", "entry point"),
    "hand-0.5": (OLD, "slice", "hand-patched upstream (drops tool turns: fewer tokens)"),
    "entry-0.9-http": (NEW, "slice", "entry point, real vLLM /render"),
    "hand-0.9-http": (NEW, "slice", "hand-patched upstream, real vLLM /render"),
    "entry-0.9-local": (NEW, "slice", "entry point, `--render-endpoint local`"),
    "entry-0.5-slice": (OLD, "slice", "entry point"),
    "entry-0.9-img-local": (NEW, "images", "entry point, `--render-endpoint local`, images"),
    "entry-0.9-img-http": (NEW, "images", "entry point, real vLLM /render, images"),
    "entry-0.9-img-parquet": (NEW, "images", "entry point, local, images inline in parquet"),
    "floor-loop": (OLD, "slice", "floor: plain apply_chat_template loop, 1 process"),
    "entry-0.9-vs-peer": (NEW, "slice", "entry point, `--render-endpoint local` (beside the peer)"),
    "specforge": (NEW, "slice", "SpecForge 0.2.0: prepare_prompt_tasks, template `qwen3.5`"),
    "floor-rows": (NEW, "slice", "floor: the same rows, one render per user message, 1 process"),
}


def runs_of(setup: Setup, args: argparse.Namespace, samples: Samples) -> list[Run]:
    names = dict(RUNS)
    for size in memory_sizes(args):
        names[f"entry-mem-{size}"] = (OLD, f"chat-{size}", "entry point")
        names[f"hand-mem-{size}"] = (OLD, f"chat-{size}", "hand-patched upstream")
    runs = []
    for name, (release, data, what) in names.items():
        if name not in samples:
            continue
        conversations = sum(1 for _ in setup.data(data).open("rb"))
        rows, tokens, spans = workloads.output_size(setup, release, name)
        runs.append(
            Run(name, what, release, data, conversations, rows, tokens, samples[name], spans)
        )
    return runs


def ratios_of(samples: Samples, args: argparse.Namespace, tokens: dict[str, int]) -> list[Ratio]:
    """The ratio table; ``tokens``: each command's output tokens (for the per-token ratio)."""

    def both(numerator: str, denominator: str) -> dict[str, list[float]]:
        return {
            "ratios": paired_ratios(samples, numerator, denominator),
            "cpu_ratios": paired_ratios(samples, numerator, denominator, "cpu"),
        }

    def per_token(numerator: str, denominator: str) -> dict[str, list[float]]:
        """``both`` scaled to the same number of output tokens (1.0: equal cost per token)."""
        if not tokens.get(numerator) or not tokens.get(denominator):
            return {"ratios": [], "cpu_ratios": []}
        scale = tokens[denominator] / tokens[numerator]
        return {k: [r * scale for r in v] for k, v in both(numerator, denominator).items()}

    sizes = memory_sizes(args)
    ratios = [
        Ratio(
            f"1a. entry point vs hand-patched, 0.5-0.7 ({OLD}, {args.slice:,} mixed)",
            "entry point / hand-patched (unequal work: upstream drops tool turns)",
            **both("entry-0.5", "hand-0.5"),
        ),
        Ratio(
            f"1a'. the same runs per output token ({OLD})",
            "entry point / hand-patched, each divided by its output tokens",
            limit=1.03,
            judge="cpu",
            **per_token("entry-0.5", "hand-0.5"),
        ),
        Ratio(
            f"1b. entry point vs hand-patched, 0.8+ ({NEW}, real vLLM, {args.slice:,} mixed)",
            "entry point / hand-patched",
            paired_ratios(samples, "entry-0.9-http", "hand-0.9-http"),
            limit=1.03,
        ),
        Ratio(
            f"2. local vs real HTTP rendering ({NEW}, {args.slice:,} mixed)",
            "`--render-endpoint local` / vLLM render server",
            paired_ratios(samples, "entry-0.9-local", "entry-0.9-http"),
            limit=0.5,
        ),
        Ratio(
            f"2b. the same runs, rendering phase only ({NEW})",
            "map over the conversations, from the runs' log timestamps",
            paired_ratios(samples, "entry-0.9-local", "entry-0.9-http", "phase"),
        ),
        Ratio(
            f"2c. local vs real HTTP rendering, images ({NEW}, {args.image_slice:,} image "
            "conversations)",
            "`--render-endpoint local` / vLLM render server (vision base, identical rows)",
            **both("entry-0.9-img-local", "entry-0.9-img-http"),
        ),
    ]
    if sizes:
        top = sizes[-1]
        ratios.append(
            Ratio(
                f"3. peak memory at {top:,} short chats ({OLD})",
                "entry point / hand-patched, peak PSS of the process tree",
                paired_ratios(samples, f"entry-mem-{top}", f"hand-mem-{top}", "peak_pss"),
                limit=1.10,
            )
        )
        ratios.append(
            Ratio(
                f"3b. the same runs, anonymous memory only ({OLD})",
                "entry point / hand-patched, peak anonymous PSS (no memory-mapped files)",
                paired_ratios(samples, f"entry-mem-{top}", f"hand-mem-{top}", "peak_anon"),
            )
        )
        if len(sizes) > 1:
            ratios.append(
                Ratio(
                    f"3c. entry point's peak memory, {top:,} / {sizes[0]:,} short chats ({OLD})",
                    f"the same command on {top // sizes[0]}x the conversations (1.0: flat)",
                    paired_ratios(samples, f"entry-mem-{top}", f"entry-mem-{sizes[0]}",
                                  "peak_pss"),
                )
            )  # fmt: skip
        ratios.append(
            Ratio(
                f"3d. the same runs' time, {top:,} short chats ({OLD}, identical rows)",
                "entry point / hand-patched",
                limit=1.03,
                judge="cpu",
                **both(f"entry-mem-{top}", f"hand-mem-{top}"),
            )
        )
    ratios += [
        Ratio(
            f"4. interpreter start-up ({NEW})",
            "`.pth` active / `SPECULATORS_QWEN_COMPAT=0`",
            limit=1.10,
            **both("start-pth-active", "start-pth-off"),
        ),
        Ratio(
            f"4b. `status` start-up ({NEW})",
            "`python -m speculators_qwen_compat status` / upstream's `speculators --help`",
            limit=1.0,
            judge="cpu",
            **both("status", "upstream-help"),
        ),
        Ratio(
            f"4c. `prepare_data --help` start-up ({NEW})",
            "`python -m speculators_qwen_compat.prepare_data --help` / `speculators --help`",
            limit=1.0,
            judge="cpu",
            **both("prepare-help", "upstream-help"),
        ),
        Ratio(
            f"5. floor ({OLD}, {args.slice:,} mixed)",
            f"entry point ({args.workers} workers) / plain apply_chat_template loop (1 process)",
            limit=1.25,
            judge="cpu",
            **both("entry-0.5-slice", "floor-loop"),
        ),
        Ratio(
            f"5b. floor ({NEW} `--render-endpoint local`, {args.slice:,} mixed, same rows)",
            "entry point (2 workers) / the same rows in a plain loop (1 process)",
            limit=1.25,
            judge="cpu",
            **both("entry-0.9-vs-peer", "floor-rows"),
        ),
        Ratio(
            f"6. the peer ({NEW} `--render-endpoint local`, {args.slice:,} mixed)",
            "entry point / SpecForge 0.2.0 data preparation",
            **both("entry-0.9-vs-peer", "specforge"),
        ),
    ]
    return [r for r in ratios if r.ratios or r.cpu_ratios]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sqc-bench-") as tmp:
        work = Path(tmp)
        logs = work / "logs"
        logs.mkdir()
        setup = Setup(ROOT, work, args.seq_length)
        prepare_inputs(setup, args)
        parts = {
            "memory": measure_memory,
            "mix": measure_full_mix,
            "render": measure_render_generation,
            "floor": measure_floor,
            "script": measure_script_generation,
            "start": measure_start_up,
            "peer": measure_peer,
            "images": measure_images,
            "regen": measure_regen,
        }
        chosen = [p for p in args.only.split(",") if p] or list(parts)
        samples: Samples = {}
        for part in chosen:
            samples.update(parts[part](setup, args, logs))
        runs = runs_of(setup, args, samples)
    minutes = (time.perf_counter() - began) / 60
    about = report.machine(setup.python(NEW))
    note = (
        f"Measured {about}. Model: the real Qwen3.6 vocabulary (248,077 tokens, "
        f"tools/build_qwen_vocab.py) with the demo's Qwen3.6-style template; data from "
        f"bench/make_data.py: {args.conversations:,} conversations of a mix of chat (55%), "
        f"multi-turn (30%) and agentic tool traces with reasoning (15%) in ShareGPT form, all of "
        f"them for the full-size run, the first {args.slice:,} for the side-by-side ratios "
        f"(vLLM 0.32's render server, `vllm launch render`, renders one request at a time per "
        f"worker); short chats for memory. `--seq-length {args.seq_length}`, "
        f"{args.workers} preprocessing workers, "
        f"{args.rounds} round(s) (start-up: {args.start_rounds} rounds of {args.start_repeat} "
        f"interpreters). Peak memory = the largest summed PSS of the command's process tree "
        f"(sampled every 0.2 s); CPU = user + system time of the command's processes (not "
        f"counted for vLLM: the server is not the command's child). Outputs compared row by "
        f"row: {'; '.join(f'{k}: {v}' for k, v in SAME_ROWS.items()) or 'none'}. The run took "
        f"{minutes:.1f} min; per-command seconds in bench/RESULTS.md."
    )
    body = (
        report.ratio_table(ratios_of(samples, args, {run.name: run.tokens for run in runs}))
        + "\n\n"
        + report.runs_table(runs)
        + "\n\n"
        + report.memory_table(runs, memory_sizes(args))
        + "\n\n"
        + note
    )
    peer = report.peer_table(runs, BAD_ROWS, args.peer_good_rows)
    print("\n" + body + ("\n\n" + peer if peer else ""))
    if not args.no_write and "images" in (args.only.split(",") if args.only else ["images"]):
        doc_block.write(IMAGES_PAGE, "image-bench", image_block(samples, args))
        print(f"\nwrote the image-bench block of {IMAGES_PAGE}")
    if not args.no_write and args.only:  # a partial run: only the peer's own sections
        if peer:
            for target in (report.DOC, RESULTS):
                report.write_block(target, f"Measured {about}.\n\n{peer}", report.PEER_BLOCK)
            print(f"\nwrote the SpecForge sections of {RESULTS} and {report.DOC}")
    elif not args.no_write:
        details = report.seconds_table(samples)
        start, end = doc_block.markers(report.PEER_BLOCK)
        RESULTS.write_text(
            f"# make bench\n\n{body}\n\n## Compared with SpecForge\n\n{start}\n"
            f"{peer or 'not run'}\n{end}\n\n## Seconds per command\n\n{details}\n\n"
            f"{workloads.DESCRIPTION}\n",
            encoding="utf-8",
        )
        report.write_block(report.DOC, body)
        if peer:
            report.write_block(report.DOC, peer, report.PEER_BLOCK)
        print(f"\nwrote {RESULTS} and the bench section of {report.DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
