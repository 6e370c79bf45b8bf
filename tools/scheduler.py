"""Run a graph of jobs (environment builds, test passes) concurrently on a few cores.

Target: ``make test`` on 2-core CI machines (tools/matrix.py defines the jobs). Each job has a
name, a kind (``build`` or ``test``, each with its own slots), the jobs it needs first and a
function returning ``(ok, summary)``. Among the ready jobs, the one with the longest expected
path to the end goes first (durations remembered from the last run); a job whose need failed is
not run. Why: run serially the suite takes 37+ minutes; builds and suites overlap here instead.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Job:
    name: str
    kind: str  # "build" or "test": which pool of slots it takes
    run: Callable[[], tuple[bool, str]]
    needs: tuple[str, ...] = ()
    guess: float = 60.0  # expected seconds when no earlier run was timed
    first: bool = False  # ahead of every other ready job of its kind (lint: fail fast)


@dataclass
class Outcome:
    name: str
    kind: str
    ok: bool | None  # None: not run because a need failed
    summary: str
    started: float = 0.0
    ended: float = 0.0

    @property
    def seconds(self) -> float:
        return self.ended - self.started


def _expected(jobs: dict[str, Job], timings: dict[str, float]) -> dict[str, float]:
    """Longest expected path from each job to the end (its own time included)."""
    users: dict[str, list[str]] = {name: [] for name in jobs}
    for job in jobs.values():
        for need in job.needs:
            users[need].append(job.name)
    memo: dict[str, float] = {}

    def rank(name: str) -> float:
        if name not in memo:
            own = timings.get(name, jobs[name].guess)
            memo[name] = own + max((rank(u) for u in users[name]), default=0.0)
        return memo[name]

    return {name: rank(name) for name in jobs}


def run_jobs(jobs: list[Job], slots: dict[str, int], timings_file: Path | None = None,
             on_done: Callable[[Outcome], None] | None = None,
             record: bool = True) -> list[Outcome]:  # fmt: skip
    """Run every job once its needs passed; returns outcomes in the order they finished."""
    by_name = {job.name: job for job in jobs}
    for job in jobs:
        missing = [n for n in job.needs if n not in by_name]
        if missing:
            raise ValueError(f"job {job.name} needs unknown {missing}")
    timings = _load(timings_file)
    priority = _expected(by_name, timings)
    origin = time.monotonic()
    lock = threading.Condition()
    done: dict[str, Outcome] = {}
    running: dict[str, str] = {}  # name -> kind
    order: list[Outcome] = []

    def finish(outcome: Outcome) -> None:
        with lock:
            done[outcome.name] = outcome
            running.pop(outcome.name, None)
            order.append(outcome)
            lock.notify_all()
        if on_done:
            on_done(outcome)

    def work(job: Job, started: float) -> None:
        try:
            ok, summary = job.run()
        except Exception as exc:  # a job's own bug is its failure, not the runner's end
            ok, summary = False, f"{type(exc).__name__}: {exc}"
        finish(Outcome(job.name, job.kind, ok, summary, started, time.monotonic() - origin))

    while len(done) < len(jobs):
        with lock:
            for job in sorted(jobs, key=lambda job: (not job.first, -priority[job.name])):
                if job.name in done or job.name in running:
                    continue
                bad = [n for n in job.needs if n in done and not done[n].ok]
                now = time.monotonic() - origin
                if bad:  # a need failed or was not run: never run
                    done[job.name] = Outcome(job.name, job.kind, None,
                                             f"not run: {bad[0]} failed", now, now)  # fmt: skip
                    order.append(done[job.name])
                elif all(n in done for n in job.needs) and sum(
                    kind == job.kind for kind in running.values()
                ) < slots.get(job.kind, 1):
                    running[job.name] = job.kind
                    threading.Thread(target=work, args=(job, now), daemon=True).start()
            if len(done) < len(jobs):
                lock.wait(timeout=5)
    if timings_file is not None and record:
        for o in order:
            # a failed part's time is a floor (it may have stopped early): kept when longer
            if o.ok or (o.ok is False and o.seconds > timings.get(o.name, 0.0)):
                timings[o.name] = round(o.seconds, 1)
        timings_file.parent.mkdir(parents=True, exist_ok=True)
        timings_file.write_text(json.dumps(timings, indent=1, sort_keys=True) + "\n")
    return order


def _load(path: Path | None) -> dict[str, float]:
    try:  # none yet, or unreadable: every job's guess
        data = json.loads(path.read_text()) if path else {}
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, (int, float))}
