"""The results table, the machine it ran on, and where it is written (bench/RESULTS.md and
docs/maintainers.md, blocks ``bench`` and ``bench-peer`` through tools/doc_block.py)."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from timing import Sample, median

sys.path.append(str(Path(__file__).resolve().parents[1] / "tools"))
import doc_block

#: The page that shows the speed tables, and their blocks.
DOC = Path(__file__).resolve().parents[1] / "docs" / "maintainers.md"
BLOCK, PEER_BLOCK = "bench", "bench-peer"


@dataclass(frozen=True)
class Ratio:
    """One measured ratio: the per-round wall-time ratios (CPU-time ratios beside them where
    every process of both commands is counted), and the target if there is one."""

    label: str
    what: str
    ratios: list[float]
    limit: float | None = None
    cpu_ratios: list[float] | None = None
    #: Which median the target is judged on: "wall", or "cpu" where the goal is the work done.
    judge: str = "wall"

    @property
    def value(self) -> float | None:
        return median(self.ratios) if self.ratios else None

    @property
    def verdict(self) -> str:
        judged = median(self.cpu_ratios) if self.judge == "cpu" and self.cpu_ratios else self.value
        if judged is None:
            return "not measured"
        if self.limit is None:
            return "reported"
        word = "met" if judged <= self.limit else "**missed**"
        return f"{word} (CPU)" if self.judge == "cpu" else word


def cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.processor() or "unknown CPU"
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else "unknown CPU"


def python_version(python: list[str]) -> str:
    ran = subprocess.run([*python, "-V"], capture_output=True, text=True)  # "Python 3.11.9"
    return ran.stdout.strip().removeprefix("Python ")


def machine(python: list[str]) -> str:
    cores = os.cpu_count() or 0
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{when} on {cores} cores ({usable} usable), {cpu_model()}, "
        f"Python {python_version(python)}, {platform.system()} {platform.release()}, "
        f"load average at the end {load} (1, 5, 15 min; other jobs shared the cores)"
    )


@dataclass(frozen=True)
class Run:
    """One prepare_data (or floor) command's samples and what it processed."""

    name: str
    what: str
    release: str
    data: str
    conversations: int
    rows: int
    tokens: int
    samples: list[Sample]
    #: Runs of ones in the output's loss masks: the assistant spans it trains on (0: none).
    spans: int = 0

    @property
    def wall(self) -> float:
        return median([s.wall for s in self.samples])

    @property
    def peak_mb(self) -> float:
        return median([s.peak_pss for s in self.samples]) / 2**20

    @property
    def anon_mb(self) -> float:
        return median([s.peak_anon for s in self.samples]) / 2**20


def runs_table(runs: list[Run]) -> str:
    lines = [
        "| command | release | data | conversations | rows out | tokens out | wall s "
        "| conversations/s | tokens/s | peak memory MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        lines.append(
            f"| `{r.name}`: {r.what} | {r.release} | {r.data} | {r.conversations:,} | {r.rows:,} "
            f"| {r.tokens:,} | {r.wall:.1f} | {r.conversations / r.wall:,.0f} "
            f"| {r.tokens / r.wall:,.0f} | {r.peak_mb:,.0f} |"
        )
    return "\n".join(lines)


def memory_table(runs: list[Run], sizes: list[int]) -> str:
    """Peak memory per size, entry point and hand-patched side by side, and the growth."""
    by_name = {r.name: r for r in runs}
    sizes = [n for n in sizes if f"entry-mem-{n}" in by_name and f"hand-mem-{n}" in by_name]
    if not sizes:
        return ""
    lines = [
        "| short chats | entry point peak MB | hand-patched peak MB | entry point / hand-patched "
        "| entry point peak anonymous MB | hand-patched peak anonymous MB |",
        "|---|---|---|---|---|---|",
    ]
    for size in sizes:
        entry, hand = by_name[f"entry-mem-{size}"], by_name[f"hand-mem-{size}"]
        lines.append(
            f"| {size:,} | {entry.peak_mb:,.0f} | {hand.peak_mb:,.0f} "
            f"| {entry.peak_mb / hand.peak_mb:.3f} | {entry.anon_mb:,.0f} | {hand.anon_mb:,.0f} |"
        )
    if len(sizes) > 1:
        low, top = sizes[0], sizes[-1]

        def grow(who: str, what: str) -> str:
            change = getattr(by_name[f"{who}-mem-{top}"], what) - getattr(
                by_name[f"{who}-mem-{low}"], what
            )
            return f"{change:+,.0f}"

        lines.append(
            f"| growth {low:,} -> {top:,} | {grow('entry', 'peak_mb')} | {grow('hand', 'peak_mb')} "
            f"| - | {grow('entry', 'anon_mb')} | {grow('hand', 'anon_mb')} |"
        )
    return "\n".join(lines)


def _numbers(values: list[float]) -> str:
    return ", ".join(f"{v:.3f}" for v in values)


def ratio_table(ratios: list[Ratio]) -> str:
    lines = [
        "| measurement | ratio | median (wall) | per round | target | result | median (CPU) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in ratios:
        target = f"<= {r.limit:g}" if r.limit is not None else "-"
        cpu = f"{median(r.cpu_ratios):.3f}" if r.cpu_ratios else "-"
        value = f"**{r.value:.3f}**" if r.value is not None else "-"
        lines.append(
            f"| {r.label} | {r.what} | {value} | {_numbers(r.ratios) or '-'} | {target} "
            f"| {r.verdict} | {cpu} |"
        )
    return "\n".join(lines)


def seconds_table(samples: dict[str, list[Sample]]) -> str:
    lines = [
        "| command | median wall s | median CPU s | median phase s | peak MB | wall s per round |",
        "|---|---|---|---|---|---|",
    ]
    for name, values in samples.items():
        walls = [s.wall for s in values]
        cpus = [s.cpu for s in values]
        phases = [s.phase for s in values if s.phase is not None]
        phase = f"{median(phases):.2f}" if phases else "-"
        per_round = ", ".join(f"{w:.2f}" for w in walls)
        peak = median([s.peak_pss for s in values]) / 2**20
        lines.append(
            f"| `{name}` | {median(walls):.2f} | {median(cpus):.2f} | {phase} | {peak:,.0f} "
            f"| {per_round} |"
        )
    return "\n".join(lines)


def write_block(path: Path, body: str, name: str = BLOCK) -> None:
    """Block ``name`` of ``path`` holds ``body`` (tools/doc_block.py); nothing else changes."""
    doc_block.write(path, name, body)


def _did(outcome: dict[str, object], good: int) -> str:
    """What a run did with ``good`` good rows and one bad one, in words."""
    said = str(outcome["said"]).replace("|", "\\|")
    said = said if len(said) <= 140 else said[:137] + "..."
    if outcome["code"] != 0:
        return f"**the run fails** (exit {outcome['code']}): `{said}`"
    return f"exit 0, {outcome['rows']:,} rows from {good + 1} conversations: `{said}`"


def peer_table(runs: list[Run], bad_rows: dict[str, dict[str, dict[str, object]]],
               good: int) -> str:  # fmt: skip
    """Ours against SpecForge: the time and what each supervises, then the bad rows."""
    by_name = {r.name: r for r in runs}
    ours, peer = by_name.get("entry-0.9-vs-peer"), by_name.get("specforge")
    if ours is None or peer is None:
        return ""
    cpu = [median([s.cpu for s in r.samples]) for r in (ours, peer)]
    lines = [
        "| compared with SpecForge 0.2.0 | ours (0.9.0, `--render-endpoint local`) | SpecForge "
        "| ours / SpecForge |",
        "|---|---|---|---|",
        f"| CPU s, {ours.conversations:,} mixed conversations, 2 workers | {cpu[0]:.1f} "
        f"| {cpu[1]:.1f} | {cpu[0] / cpu[1]:.2f} |",
        f"| wall s | {ours.wall:.1f} | {peer.wall:.1f} | {ours.wall / peer.wall:.2f} |",
        f"| peak memory MB | {ours.peak_mb:,.0f} | {peer.peak_mb:,.0f} "
        f"| {ours.peak_mb / peer.peak_mb:.2f} |",
        f"| rows out | {ours.rows:,} (a row per assistant turn) | {peer.rows:,} | - |",
        f"| tokens out | {ours.tokens:,} | {peer.tokens:,} | - |",
        f"| assistant spans supervised (runs of ones in the loss masks) | {ours.spans:,} "
        f"| {peer.spans:,} | {ours.spans / max(peer.spans, 1):.2f} |",
    ]
    for kind, outcomes in bad_rows.items():
        lines.append(
            f"| one bad row: {kind.replace('-', ' ')} | {_did(outcomes['ours'], good)} "
            f"| {_did(outcomes['SpecForge'], good)} | - |"
        )
    return "\n".join(lines)
