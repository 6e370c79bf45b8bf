"""Parquet with inline images vs the same rows as JSONL with image paths: peak memory, temporary
disk and CPU, 1 worker and 8 (issue 55, item 3; docs/images.md's ``hub-memory`` block).

``python bench/hub_memory.py [--rows N] [--rounds R] [--doc]`` (run by `make bench-hub-memory`,
tools venv). Data: N LLaMA-Factory rows, each one 64x64 PNG of noise (incompressible, ~12 KB: the
issue's 24,000 rows make a ~300 MB parquet) and a two-turn chat; the parquet holds each image's
bytes (``Image()``, datasets' schema, row groups of 100 as ``to_parquet`` writes images), the JSONL
names the same files by path. Each pair runs prepare_data (speculators 0.9.0, vision base, the
composite checkpoint with its processor files, local rendering) next to each other, the order
reversed every other round; figures are medians of the per-round ratios. Memory: the peak of the
summed PSS of the process tree (timing.py), sampled every 0.2 s. Temporary disk: the peak size of
the run's datasets cache and temp folder (where the rows copy and upstream's map caches go),
sampled likewise, beside the media folder's size at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(BENCH))

import doc_block  # noqa: E402
from timing import Command, Sample, time_sample  # noqa: E402
from workloads import Setup, environment  # noqa: E402

DOC = ROOT / "docs" / "images.md"
BLOCK = "hub-memory"
RELEASE = "0.9.0"
SIDE = 64
GOALS = {"memory": 1.10, "cpu": 1.2}


def _noise_png(rng: random.Random) -> bytes:
    """A SIDE x SIDE RGB PNG of noise, written with the standard library (no Pillow here)."""
    import struct
    import zlib

    raw = b"".join(b"\x00" + rng.randbytes(SIDE * 3) for _ in range(SIDE))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", SIDE, SIDE, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 1))
        + (chunk(b"IEND", b""))
    )


def make_data(folder: Path, rows: int, seed: int) -> None:
    """folder/chats.parquet (inline bytes) and folder/chats.jsonl (paths to folder/images/)."""
    images = folder / "images"
    images.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    script = f"""
import json, sys
import pyarrow as pa, pyarrow.parquet as pq
from datasets import Features, Image, Sequence, Value
features = Features({{"messages": [{{"role": Value("string"), "content": Value("string")}}],
                      "images": Sequence(Image())}})
writer = pq.ParquetWriter({str(folder / "chats.parquet")!r}, features.arrow_schema)
batch = []
for line in sys.stdin:
    row = json.loads(line)
    path = row["images"][0]
    row["images"] = [{{"bytes": open(path, "rb").read(), "path": path.rsplit("/", 1)[-1]}}]
    batch.append(row)
    if len(batch) == 100:
        writer.write_table(pa.Table.from_pylist(batch, schema=features.arrow_schema))
        batch = []
if batch:
    writer.write_table(pa.Table.from_pylist(batch, schema=features.arrow_schema))
writer.close()
"""
    lines = []
    for i in range(rows):
        path = images / f"{i:06d}.png"
        path.write_bytes(_noise_png(rng))
        turns = [
            {"role": "user", "content": f"<image>What is in picture {i}?"},
            {"role": "assistant", "content": f"Noise, sample {i}, {rng.randint(0, 999)} dots."},
        ]
        lines.append(json.dumps({"messages": turns, "images": [str(path)]}))
    text = "\n".join(lines) + "\n"
    (folder / "chats.jsonl").write_text(text, encoding="utf-8")
    python = [str(ROOT / "tools" / "release_python.sh"), RELEASE, "-c", script]
    subprocess.run(python, input=text, text=True, env=environment(), check=True)


def _model(folder: Path, vocab: Path) -> None:
    """The tests' weight-less composite Qwen3.6 checkpoint with its processor files (the real
    vocabulary), as bench/make_images.py builds it."""
    script = (
        f"import sys; from pathlib import Path; sys.path.insert(0, {str(ROOT / 'tests')!r}); "
        f"import image_corpus; image_corpus.model_folder(Path({str(folder)!r}), 'dense', "
        f"Path({str(vocab)!r}))"
    )
    python = [str(ROOT / "tools" / "release_python.sh"), RELEASE, "-c", script]
    subprocess.run(python, env=environment(), check=True)


def _size(folder: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):  # removed while walking
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def _run(setup: Setup, name: str, data: Path, workers: int, log: Path) -> tuple[Sample, int, int]:
    """One prepare_data run: its sample, the peak temporary disk and the media folder's size."""
    output = setup.output(name)
    temp = setup.work / "temp" / name
    for folder in (output, output.with_name(output.name + "-media"), temp):
        subprocess.run(["rm", "-rf", str(folder)], check=True)
    temp.mkdir(parents=True)
    argv = [str(ROOT / "tools" / "release_python.sh"), RELEASE, "vision",
            "-m", "speculators_qwen_compat.prepare_data", "--model", str(setup.vision_model),
            "--data", str(data), "--output", str(output), "--seq-length", "512",
            "--num-preprocessing-workers", str(workers)]  # fmt: skip
    env = environment(HF_DATASETS_CACHE=str(temp / "datasets"), TMPDIR=str(temp / "tmp"))
    (temp / "tmp").mkdir()
    peak = [0]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _size(temp))
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        sample = time_sample(Command(name, argv, env), log)
    finally:
        done.set()
        watcher.join()
    media = _size(output.with_name(output.name + "-media"))
    return sample, peak[0], media


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=24_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", default="1,8")
    parser.add_argument("--vocab", type=Path, default=ROOT / ".venvs" / "assets" / "qwen36-vocab")
    parser.add_argument("--doc", action="store_true", help=f"write {DOC.name}'s {BLOCK} block")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hub-memory-"))
    setup = Setup(root=ROOT, work=work, seq_length=512)
    print(f"== data: {args.rows:,} rows with one {SIDE}x{SIDE} PNG each, in {work}", flush=True)
    make_data(work / "data", args.rows, setup.seed)
    _model(setup.vision_model, args.vocab)
    parquet_mb = (work / "data" / "chats.parquet").stat().st_size / 1e6
    logs = work / "logs"
    logs.mkdir()
    ratios: dict[int, dict[str, list[float]]] = {}
    disk: dict[int, list[tuple[int, int, int]]] = {}  # (parquet temp, jsonl temp, media)
    for workers in (int(w) for w in args.workers.split(",")):
        ratios[workers] = {"memory": [], "anon": [], "cpu": [], "wall": []}
        disk[workers] = []
        for round_ in range(args.rounds):
            kinds = ["parquet", "jsonl"] if round_ % 2 == 0 else ["jsonl", "parquet"]
            got = {}
            for kind in kinds:
                name = f"{kind}-{workers}"
                got[kind] = _run(setup, name, work / "data" / f"chats.{kind}", workers,
                                 logs / f"{name}-{round_}.log")  # fmt: skip
                sample = got[kind][0]
                print(f"  {name} round {round_}: wall {sample.wall:.1f}s cpu {sample.cpu:.1f}s "
                      f"pss {sample.peak_pss / 2**20:.0f} MiB temp {got[kind][1] / 1e6:.1f} MB "
                      f"media {got[kind][2] / 1e6:.1f} MB", flush=True)  # fmt: skip
            (p, p_temp, media), (j, j_temp, _) = got["parquet"], got["jsonl"]
            ratios[workers]["memory"].append(p.peak_pss / j.peak_pss)
            ratios[workers]["anon"].append(p.peak_anon / j.peak_anon)
            ratios[workers]["cpu"].append(p.cpu / j.cpu)
            ratios[workers]["wall"].append(p.wall / j.wall)
            disk[workers].append((p_temp, j_temp, media))
    text = _block(args, parquet_mb, ratios, disk)
    print(text)
    if args.doc:
        doc_block.write(DOC, BLOCK, text)
        print(f"wrote the {BLOCK} block of {DOC}")
    return 0


def _block(args: argparse.Namespace, parquet_mb: float, ratios: dict, disk: dict) -> str:
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    lines = [
        f"Written by `bench/hub_memory.py --doc` on {when} at {commit}: {args.rows:,} rows with "
        f"one {SIDE}x{SIDE} PNG each (parquet {parquet_mb:.0f} MB), speculators {RELEASE}, local "
        f"rendering, {args.rounds} round(s), medians of the per-round ratios:",
        "",
        "| parquet with inline images / JSONL with paths | " + " | ".join(
            f"{w} worker{'s' if w > 1 else ''}" for w in ratios) + " | goal |",
        "|---|" + "---|" * len(ratios) + "---|",
    ]  # fmt: skip

    def row(label: str, key: str, goal: str) -> str:
        values = " | ".join(f"{statistics.median(r[key]):.2f}" for r in ratios.values())
        return f"| {label} | {values} | {goal} |"

    lines.append(row("peak memory (summed PSS of the process tree)", "memory", "<= 1.10"))
    lines.append(row("peak anonymous memory", "anon", ""))
    lines.append(row("CPU (user + system)", "cpu", "<= 1.2"))
    lines.append(row("wall", "wall", ""))
    temps = " | ".join(
        f"{max(d[0] for d in rows) / 1e6:.0f} MB vs {max(d[2] for d in rows) / 1e6:.0f} MB"
        for rows in disk.values()
    )
    lines.append(f"| peak temporary disk vs the media folder | {temps} | at most the folder |")
    jsonl = " | ".join(f"{max(d[1] for d in rows) / 1e6:.0f} MB" for rows in disk.values())
    lines.append(f"| the JSONL run's peak temporary disk | {jsonl} | |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
