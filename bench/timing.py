"""Timing commands side by side: alternating rounds, wall time of whole subprocesses."""

from __future__ import annotations

import datetime
import re
import resource
import shutil
import statistics
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Command:
    """One measured command. A sample is ``repeat`` runs back to back; ``fresh`` folders are
    removed before each sample (not timed), so every sample does the same work."""

    name: str
    argv: list[str]
    env: dict[str, str]
    repeat: int = 1
    fresh: tuple[Path, ...] = field(default_factory=tuple)
    #: Log lines (regexes) that open and close a phase timed from the log's own timestamps.
    phase: tuple[str, str] | None = None


@dataclass(frozen=True)
class Sample:
    """Seconds of one sample: wall clock, and CPU (user + system) of the command's processes."""

    wall: float
    cpu: float
    phase: float | None = None
    #: Peak of the summed PSS of the command's process tree (bytes), sampled every 0.2 s.
    peak_pss: int = 0
    #: The same for anonymous memory only (no memory-mapped file pages, which the kernel can
    #: drop: datasets' Arrow files are read through memory maps).
    peak_anon: int = 0


class CommandFailed(RuntimeError):
    pass


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_sample(command: Command, log: Path) -> Sample:
    """One sample of ``command``; its stderr goes to ``log``."""
    for folder in command.fresh:
        shutil.rmtree(folder, ignore_errors=True)
    wall = cpu = 0.0
    peak = peak_anon = 0
    for _ in range(command.repeat):
        with log.open("wb") as err:
            cpu_before = _children_cpu()
            start = time.perf_counter()
            process = subprocess.Popen(
                command.argv, env=command.env, stdout=subprocess.DEVNULL, stderr=err
            )
            while process.poll() is None:
                pss, anon = tree_pss(process.pid)
                peak, peak_anon = max(peak, pss), max(peak_anon, anon)
                time.sleep(0.2)
            code = process.returncode
            wall += time.perf_counter() - start
            cpu += _children_cpu() - cpu_before
        if code != 0:
            tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
            raise CommandFailed(f"{command.name} exited with {code}:\n{tail}")
    phase = _phase_seconds(log, command.phase) if command.phase else None
    return Sample(wall, cpu, phase, peak, peak_anon)


def _children_of() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def tree_pss(root: int) -> tuple[int, int]:
    """Summed proportional set size (bytes) of ``root`` and its descendants, in all and of
    anonymous memory: shared pages of forked workers counted once in all, not once per process."""
    children = _children_of()
    total = anon = 0
    todo = [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, ()))
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        for line in rollup.splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1]) * 1024
            elif line.startswith("Pss_Anon:"):
                anon += int(line.split()[1]) * 1024
    return total, anon


STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")


def _phase_seconds(log: Path, markers: tuple[str, str]) -> float | None:
    """Seconds between the first log line matching ``markers[0]`` and the first one after it
    matching ``markers[1]``, from their ``logging`` timestamps; None when either is missing."""
    stamps: list[float] = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        match = STAMP.match(line)
        if match and re.search(markers[len(stamps)], line):
            when = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")
            stamps.append(when.timestamp() + int(match.group(2)) / 1000)
            if len(stamps) == 2:
                return stamps[1] - stamps[0]
    return None


def alternate(commands: Sequence[Command], rounds: int, logs: Path) -> dict[str, list[Sample]]:
    """Run every command once per round, the order reversed every other round, so that drift in
    the machine's load hits every command alike. Returns the samples per command name."""
    samples: dict[str, list[Sample]] = {c.name: [] for c in commands}
    for index in range(rounds):
        order = list(commands) if index % 2 == 0 else list(reversed(commands))
        for command in order:
            sample = time_sample(command, logs / f"{command.name}.log")
            samples[command.name].append(sample)
            print(
                f"  round {index + 1}/{rounds}  {command.name:<22} "
                f"{sample.wall:8.2f} s wall {sample.cpu:8.2f} s CPU",
                flush=True,
            )
    return samples


def paired_ratios(
    samples: dict[str, list[Sample]], numerator: str, denominator: str, what: str = "wall"
) -> list[float]:
    """The ratio of the two commands within each round (they ran next to each other) in
    ``what``: "wall", "cpu" or "phase" seconds; rounds without a phase are left out, and a pair
    not run (``run_bench.py --only``) gives none."""
    if numerator not in samples or denominator not in samples:
        return []
    pairs = zip(samples[numerator], samples[denominator], strict=True)
    values = [(getattr(a, what), getattr(b, what)) for a, b in pairs]
    return [x / y for x, y in values if x is not None and y]


def median(values: Sequence[float]) -> float:
    return statistics.median(values)
