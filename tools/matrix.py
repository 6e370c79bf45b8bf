"""Run the test suite in the venv of each release and print a release x fix table.

Usage: python tools/matrix.py [RELEASE ...] (default: every release in releases.py). Each venv is
``.venvs/rel/<release>`` on the shared base venv (tools/release_python.sh; built by the Makefile). For each release:
the state of every fix as ``status --json`` reports it, and whether the suite passed. Exits 1
when any suite failed or any state differs from the one declared in releases.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from speculators_qwen_compat.core.releases import TESTED_RELEASES  # noqa: E402


def release_python(release: str, base: str = "cpu") -> list[str]:
    """The command that runs Python for one release: its .venvs/rel folder on a shared base."""
    return [str(ROOT / "tools" / "release_python.sh"), release, base]


def fix_states(release: str) -> dict[str, str]:
    out = subprocess.run(
        [*release_python(release), "-m", "speculators_qwen_compat", "status", "--json"],
        capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    if out.returncode != 0:
        return {}
    return {p["name"]: p["state"] for p in json.loads(out.stdout)["patches"]}


def counts(summary: str) -> tuple[int, int]:
    """(passed, failed + errors) from a pytest summary line."""
    found = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|error)", summary)}
    return found.get("passed", 0), found.get("failed", 0) + found.get("error", 0)


def run_suite(release: str, pytest_args: list[str]) -> tuple[bool, str]:
    started = time.monotonic()
    result = subprocess.run(
        [*release_python(release), "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider",
         *pytest_args, str(ROOT / "tests")],
        capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    summary = [
        line for line in result.stdout.splitlines() if re.search(r"\d+ (passed|failed)", line)
    ]
    log = ROOT / "build" / f"matrix-{release}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(result.stdout + result.stderr)
    took = f"{time.monotonic() - started:.0f}s"
    return result.returncode == 0, f"{(summary or ['no summary'])[-1].strip('= ')} ({took})"


def table(rows: dict[str, tuple[dict[str, str], bool, str]]) -> str:
    fixes = sorted({fix for states, _, _ in rows.values() for fix in states})
    head = "| release | " + " | ".join(fixes) + " | suite |"
    lines = [head, "|" + "---|" * (len(fixes) + 2)]
    for release, (states, passed, summary) in rows.items():
        declared = TESTED_RELEASES[release].fixes if release in TESTED_RELEASES else {}
        cells = []
        for fix in fixes:
            state = states.get(fix, "?")
            mark = (
                ""
                if not declared or declared.get(fix) == state
                else " (declared " + (f"{declared.get(fix)})")
            )
            cells.append(state + mark)
        verdict = ("pass" if passed else "FAIL") + f": {summary}"
        lines.append(f"| {release} | " + " | ".join(cells) + f" | {verdict} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    pytest_args = [a for a in argv if a.startswith("-")]
    releases = [a for a in argv if not a.startswith("-")] or list(TESTED_RELEASES)
    rows = {}
    ok = True
    for release in releases:  # build what is missing, once (tools/build_venv.sh reuses the rest)
        subprocess.run([str(ROOT / "tools" / "build_venv.sh"), "release", release], check=True)
    for release in releases:
        print(f"== speculators {release}", flush=True)
        passed, summary = run_suite(release, pytest_args)
        states = fix_states(release)
        declared = TESTED_RELEASES.get(release)
        ok &= passed and (declared is None or states == declared.fixes)
        rows[release] = (states, passed, summary)
        print(f"   {'pass' if passed else 'FAIL'}: {summary}", flush=True)
    rendered = table(rows)
    (ROOT / "build" / "matrix.md").write_text(rendered + "\n")
    print(rendered)
    totals = [counts(summary) for _, _, summary in rows.values()]
    passed, failed = sum(p for p, _ in totals), sum(f for _, f in totals)
    print(f"matrix: {passed} passed, {failed} failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
