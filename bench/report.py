"""The results table, the machine it ran on, and where it is written (RESULTS.md, README)."""

from __future__ import annotations

import os
import platform
import re
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from timing import Sample, median

START, END = "<!-- bench:start -->", "<!-- bench:end -->"


@dataclass(frozen=True)
class Ratio:
    """One measured ratio: the per-round wall-time ratios (CPU-time ratios beside them where
    every process of both commands is counted), and the target if there is one."""

    label: str
    what: str
    ratios: list[float]
    limit: float | None = None
    cpu_ratios: list[float] | None = None

    @property
    def value(self) -> float | None:
        return median(self.ratios) if self.ratios else None

    @property
    def verdict(self) -> str:
        if self.value is None:
            return "not measured"
        if self.limit is None:
            return "reported"
        return "met" if self.value <= self.limit else "**missed**"


def cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.processor() or "unknown CPU"
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else "unknown CPU"


def python_version(python: str) -> str:
    code = "import platform; print(platform.python_version())"
    return subprocess.run([python, "-c", code], capture_output=True, text=True).stdout.strip()


def machine(python: str) -> str:
    cores = os.cpu_count() or 0
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{when} on {cores} cores ({usable} usable), {cpu_model()}, "
        f"Python {python_version(python)}, {platform.system()} {platform.release()}"
    )


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
        "| command | median wall s | median CPU s | median phase s | wall s per round |",
        "|---|---|---|---|---|",
    ]
    for name, values in samples.items():
        walls = [s.wall for s in values]
        cpus = [s.cpu for s in values]
        phases = [s.phase for s in values if s.phase is not None]
        phase = f"{median(phases):.2f}" if phases else "-"
        per_round = ", ".join(f"{w:.2f}" for w in walls)
        lines.append(
            f"| `{name}` | {median(walls):.2f} | {median(cpus):.2f} | {phase} | {per_round} |"
        )
    return "\n".join(lines)


def update_readme(readme: Path, body: str) -> None:
    """Replace what stands between the bench markers; nothing else in the file changes."""
    text = readme.read_text(encoding="utf-8")
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{readme}: no {START} ... {END} section")
    new = text[: start + len(START)] + "\n" + body + "\n" + text[end:]
    readme.write_text(new, encoding="utf-8")
