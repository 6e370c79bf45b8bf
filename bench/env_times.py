"""Cold and warm: ``make demo`` (``make test``) from a clean copy with an empty environment folder,
then the same command again with the environments it built, one after the other.

Usage: make bench-envs (python bench/env_times.py [demo] [test]; default demo; a clone of HEAD)
Target: issue 36's bounds, on the machine it runs on with the download caches (uv's, pip's, the
bootstrapped uv) warm: a cold ``make demo`` at most 3x the warm one, a cold ``make test`` at most
2 minutes more than the warm one. Writes the figures into docs/maintainers.md (the ``env-times``
block, tools/doc_block.py; with ``test``, the warm run's ``matrix-times`` block too: the part
times of the full run it wrote into its clone) and prints them; each command's output goes to
build/env-times/TARGET-{cold,warm}.log. Exits 1 when a command failed or a bound is missed.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))  # doc_block

import doc_block  # noqa: E402

DOC = ROOT / "docs" / "maintainers.md"
LOGS = ROOT / "build" / "env-times"
#: target -> (bound, what it means): cold / warm at most 3, cold - warm at most 120 s
BOUNDS = {"demo": ("ratio", 3.0), "test": ("difference", 120.0)}


def timed(target: str, clone: Path, venvs: Path, label: str) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the command and its children, last line) of ``make``;
    its output in build/env-times/TARGET-LABEL.log."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    env = {**os.environ, "VENVS": str(venvs)}
    out = subprocess.run(
        ["make", "-C", str(clone), target], env=env, capture_output=True, text=True
    )
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    LOGS.mkdir(parents=True, exist_ok=True)
    (LOGS / f"{target}-{label}.log").write_text(out.stdout + out.stderr, encoding="utf-8")
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    if out.returncode != 0:
        sys.stdout.write(out.stdout[-3000:] + out.stderr[-3000:])
        raise SystemExit(f"speculators_qwen_compat: error: make {target} failed (above)")
    last = next((ln for ln in reversed(lines) if ln.startswith(("wrote ", "matrix: "))), lines[-1])
    return wall, cpu, last


def clock(seconds: float) -> str:
    return f"{int(seconds // 60)}m{seconds % 60:04.1f}s"


def measure(target: str) -> tuple[str, bool]:
    scratch = Path(tempfile.mkdtemp(prefix=f"measure-{target}."))
    try:
        clone = scratch / "clone"  # a clean clone of this checkout's HEAD
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        venvs = scratch / "venvs"  # empty: every environment is built
        cold = timed(target, clone, venvs, "cold")
        warm = timed(target, clone, venvs, "warm")
        parts = doc_block.read(clone / "docs" / "maintainers.md", "matrix-times")
        if target == "test" and parts is not None:
            doc_block.write(DOC, "matrix-times", parts)  # the warm full run's part times
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    kind, bound = BOUNDS[target]
    value = cold[0] / warm[0] if kind == "ratio" else cold[0] - warm[0]
    ok = value <= bound
    shown = (
        f"{value:.1f}x (bound {bound:.0f}x)" if kind == "ratio" else f"+{clock(value)} (bound +2m)"
    )
    shown += "" if ok else " MISSED"
    line = (f"| `make {target}` | {clock(cold[0])} ({clock(cold[1])} CPU) | {clock(warm[0])} "
            f"({clock(warm[1])} CPU) | {shown} | {warm[2][:70]} |")  # fmt: skip
    print(line, flush=True)
    return line, ok


def main(argv: list[str]) -> int:
    targets = [t for t in argv if t in BOUNDS] or ["demo"]
    rows = [measure(target) for target in targets]
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()  # fmt: skip
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    body = (
        "Written by bench/env_times.py (`make bench-envs`) on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
        f" at {head}, {os.cpu_count()} cores, load average at the end {load} (other jobs may have "
        "shared the cores): each command from a clean copy with an empty environment folder "
        "(cold), then again with what it built (warm), one after the other; the download caches "
        "(uv's, pip's, the bootstrapped uv) warm.\n\n"
        "| command | cold: wall (CPU) | warm: wall (CPU) | cold vs warm | last line |\n"
        "|---|---|---|---|---|\n" + "\n".join(row for row, _ in rows)
    )
    skipped = [t for t in BOUNDS if t not in targets]
    body += "".join(f"\n| `make {t}` | not measured in this run | | | |" for t in skipped)
    doc_block.write(DOC, "env-times", body)
    print(f"wrote the env-times block of {DOC.relative_to(ROOT)}")
    return 0 if all(ok for _, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
