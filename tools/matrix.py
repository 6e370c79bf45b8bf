"""``make test``: build the test environments and run every test pass, concurrently, timed.

Usage: python tools/matrix.py [--quick] [--main SOURCE] [--jobs N] [--build-jobs N] [RELEASE ...]
[-- PYTEST-ARGS]. Target: CI on 2-core machines, under 50 minutes (10 for --quick). Parts, each
a job of tools/scheduler.py, started as soon as what it needs is built:
- ``lint`` (ruff); builds (tools/environments.py) and ``install:cpu``/``install:vision`` (this
  package's wheel into this checkout's own venvs: two checkouts each test their own code);
- ``pure`` (tests marked ``pure``) once; ``suite:<release>`` (every other test but the ``vllm``
  ones and tests/pipeline; ``vision`` tests deselect themselves on the CPU base) per release,
  then ``status --json`` for the release x fix table; ``vision:<release>`` (base-vision, 0.6.0.2+);
- ``vllm:render``, ``vllm:regen`` (a real vLLM: rendering; regenerate-responses' generation) and
  ``pipeline`` (tests/pipeline), on the newest release.
``--main SOURCE``: only the suite, on speculators from upstream's main (``rel/main``; SOURCE a git
URL, URL@REF or a local checkout), ending ``main: N passed, M failed`` and the fixes whose state
differs from the newest release's. At the end: each part's wall time, the release x fix table,
``matrix: N passed, M failed``; a full run writes its times into docs/maintainers.md
(``matrix-times``). Exits 1 when a part failed (a pass selecting no test fails unless in
EXPECTED_EMPTY) or a fix's state differs from releases.py. Logs: build/parts/<part>.log.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import doc_block  # noqa: E402
import environments  # noqa: E402
from scheduler import Job, Outcome, run_jobs  # noqa: E402

from speculators_qwen_compat.core.releases import TESTED_RELEASES  # noqa: E402

BUILD = ROOT / "build"
LOGS = BUILD / "parts"
LINTED = "speculators_qwen_compat tests tools bench"
QUICK_RELEASES = ("0.5.0", "0.9.0")  # the seed's release and the newest
VISION_FROM = "0.6.0.2"  # the first release that loads an AutoProcessor
#: Tests that run in a pass of their own, not in every release's suite. (``vision`` tests
#: deselect themselves on the CPU base, and tests/conftest.py refuses "vision" in -m there.)
OWN_PASSES = ("pure", "vllm")
#: seconds, before a run on this machine was timed
GUESSES = {"build:base-vision": 240, "build:vllm": 240, "build:rel": 90, "suite": 400,
           "vllm:render": 900, "vllm:regen": 600, "pipeline": 600}  # fmt: skip
#: tools/environments.py, run as a part of its own
ENVS = [sys.executable, str(ROOT / "tools" / "environments.py")]


#: the environments' real folder: a fresh clone reads the part times earlier clones recorded
venvs = functools.cache(environments.folder)


def release_python(release: str, base: str = "cpu") -> list[str]:
    """The command that runs Python for one release: its rel folder on this checkout's venv."""
    return [str(ROOT / "tools" / "release_python.sh"), release, base]


def test_env() -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env.setdefault("QWEN_VOCAB_DIR", str(venvs() / "assets" / "qwen36-vocab"))
    return env


#: where a suite's test_activation.py leaves its ``status --json`` (else status is run below)
STATUS_FILE_ENV = "MATRIX_STATUS_FILE"


def status_file(release: str) -> Path:
    return BUILD / "tmp" / f"suite-{release}-status.json"


def fix_states(release: str) -> dict[str, str]:
    saved = status_file(release)
    if saved.is_file():
        text = saved.read_text()
    else:
        status = [*release_python(release), "-m", "speculators_qwen_compat", "status", "--json"]
        out = subprocess.run(status, capture_output=True, text=True, env=test_env())
        if out.returncode != 0:
            return {}
        text = out.stdout
    return {p["name"]: p["state"] for p in json.loads(text)["patches"]}


def counts(summary: str) -> tuple[int, int]:
    """(passed, failed + errors) from a pytest summary line."""
    found = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|errors?)", summary)}
    errors = found.get("error", 0) + found.get("errors", 0)
    return found.get("passed", 0), found.get("failed", 0) + errors


#: CPU seconds (user + system, the part's processes and their children) per part.
CPU: dict[str, float] = {}


def run_logged(name: str, command: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run a command with its output in build/parts/<name>.log; (exit code, output)."""
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"{name.replace(':', '-')}.log"
    with log.open("w") as sink:  # written as it runs: `tail -f` shows a slow part
        process = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env=env or dict(os.environ), cwd=ROOT
        )
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = code = os.waitstatus_to_exitcode(status)
    CPU[name] = CPU.get(name, 0.0) + usage.ru_utime + usage.ru_stime
    return code, log.read_text(errors="replace")


def pytest_pass(
    name: str, release: str, base: str, select: str, pytest_args: list[str], paths: list[str],
    extra_env: dict[str, str] | None = None,
) -> tuple[bool, str]:  # fmt: skip
    """One pytest run in a release's environment; (passed, summary line)."""
    basetemp = BUILD / "tmp" / name.replace(":", "-")
    basetemp.parent.mkdir(parents=True, exist_ok=True)  # pytest makes only the last level
    env = {**test_env(), "HF_DATASETS_CACHE": str(basetemp.parent / f"{basetemp.name}-hf")}
    env.update(extra_env or {})
    # --durations: each part's log ends with its slowest tests.
    command = [
        *release_python(release, base), "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider",
        f"--basetemp={basetemp}", "-m", select, "--durations=15", *pytest_args, *paths,
    ]  # fmt: skip
    code, output = run_logged(name, command, env)
    found = r"\d+ (passed|failed|errors?|deselected)|no tests ran"
    lines = [line.strip("= ") for line in output.splitlines() if re.search(found, line)]
    summary = lines[-1] if lines else "no summary"
    return verdict(name, code, summary, narrowed=bool(pytest_args))


#: pytest's exit code when a run selected no test ("no tests collected").
NO_TESTS = 5
#: Passes that may select no test, each with why. Any other pass whose marker or paths match
#: nothing fails: a tier whose marker stopped matching must not go green without a test run.
EXPECTED_EMPTY: dict[str, str] = {}


def verdict(name: str, code: int, summary: str, narrowed: bool = False) -> tuple[bool, str]:
    """(passed, summary) of a pytest pass from its exit code. Selecting nothing passes only for
    a pass in EXPECTED_EMPTY, or in a run narrowed by pytest arguments (``-k``, paths: the same
    rule that keeps such a run's times out of the record), where most passes match nothing."""
    if code != NO_TESTS:
        return code == 0, summary
    if name in EXPECTED_EMPTY:
        return True, f"no tests selected, as declared: {EXPECTED_EMPTY[name]} ({summary})"
    if narrowed:
        return True, f"no tests selected by the pytest arguments ({summary})"
    return False, f"no tests selected: its marker or paths match nothing ({summary})"


def run_suite(release: str, pytest_args: list[str]) -> tuple[bool, str]:
    """Every test of the release's own suite (not the passes of their own)."""
    select = " and ".join(f"not {mark}" for mark in OWN_PASSES)
    ignore = [f"--ignore={ROOT / 'tests' / 'pipeline'}"]
    status_file(release).unlink(missing_ok=True)  # only this run's status counts
    return pytest_pass(
        f"suite:{release}", release, "cpu", select, [*ignore, *pytest_args],
        [str(ROOT / "tests")], extra_env={STATUS_FILE_ENV: str(status_file(release))},
    )  # fmt: skip


def command_job(name: str, command: list[str]) -> Callable[[], tuple[bool, str]]:
    def run() -> tuple[bool, str]:
        code, output = run_logged(name, command)
        last = [line for line in output.splitlines() if line.strip()]
        return code == 0, (last[-1][:120] if last else "done") if code else "ok"

    return run


def plan(args: argparse.Namespace, pytest_args: list[str], states: dict) -> list[Job]:
    """The jobs of this run, with what each needs."""
    build = [*ENVS, "build"]
    releases = args.releases or list(QUICK_RELEASES if args.quick else TESTED_RELEASES)
    releases = ["main"] if args.main else releases
    newest = max(releases, key=_version)
    only_suite = args.quick or bool(args.main)
    vision = [] if only_suite else [r for r in releases if _version(r) >= _version(VISION_FROM)]
    jobs: list[Job] = []

    def builder(name: str, command: list[str], needs: tuple[str, ...] = (), guess: float = 60):
        jobs.append(Job(name, "build", command_job(name, command), needs, guess))

    if not args.main:
        builder("build:tools", [*build, "tools"], guess=20)
        ruff = f'"{venvs()}/tools/bin/ruff"'
        lint = command_job(
            "lint", ["sh", "-c", f"{ruff} check {LINTED} && {ruff} format --check {LINTED}"]
        )
        jobs.append(Job("lint", "test", lint, ("build:tools",), 5, first=True))
    builder("build:base-cpu", [*build, "base-cpu"], guess=40)
    builder("wheel", [*ENVS, "wheel"], guess=15)
    if vision:
        builder("build:base-vision", [*build, "base-vision"], guess=GUESSES["build:base-vision"])
    for base in ("cpu", "vision") if vision else ("cpu",):
        builder(f"install:{base}", [*ENVS, "install", base], (f"build:base-{base}", "wheel"), 10)
    for release in releases:
        builder(f"build:rel-{release}", [*build, f"rel/{release}"], guess=GUESSES["build:rel"])
    builder("build:vocab", [*build, "assets/qwen36-vocab"], guess=60)  # builds its base too
    if not only_suite:
        builder("build:vllm", [*build, "vllm", "vllm-torchvision"], guess=GUESSES["build:vllm"])

    def suite(release: str) -> Callable[[], tuple[bool, str]]:
        def run() -> tuple[bool, str]:
            passed, summary = run_suite(release, pytest_args)
            states[release] = fix_states(release)
            declared = TESTED_RELEASES.get(release)
            if declared and states[release] != declared.fixes:
                return False, f"{summary}; fix states differ from releases.py"
            return passed, summary

        return run

    def tests(name: str, release: str, base: str, select: str, paths: list[str]):
        return lambda: pytest_pass(name, release, base, select, pytest_args, paths)

    tests_dir = [str(ROOT / "tests")]
    cpu = ("install:cpu", "build:vocab")
    if not args.main:  # release-independent: the main job's question is the suite
        jobs.append(Job("pure", "test", tests("pure", newest, "cpu", "pure", tests_dir),
                        (*cpu, f"build:rel-{newest}"), 30))  # fmt: skip
    # tests/test_norm_verdict.py judges folders another 0.8+ release saved, in every suite
    cross = [f"build:rel-{r}" for r in releases if _version(r) >= (0, 8)]
    for release in releases:
        needs = tuple(dict.fromkeys((*cpu, f"build:rel-{release}", *cross)))
        jobs.append(Job(f"suite:{release}", "test", suite(release), needs, GUESSES["suite"]))
    for release in vision:
        name = f"vision:{release}"
        needs = ("install:vision", f"build:rel-{release}", "build:vocab")
        jobs.append(Job(name, "test", tests(name, release, "vision", "vision", tests_dir), needs))
    if not only_suite:
        # tests/test_render_endpoint.py runs prepare_data of every release that renders (0.8+)
        renders = [f"build:rel-{r}" for r in releases if _version(r) >= (0, 8)]
        needs = tuple(dict.fromkeys((*cpu, f"build:rel-{newest}", *renders, "build:vllm")))
        # tests/test_vllm_images.py runs prepare_data of 0.8+ on the vision venv too
        vision_venv = ("install:vision",) if vision else ()
        # two passes, each with its own servers, so neither alone is the run's critical path
        regen = [str(ROOT / "tests" / "test_regenerate_responses.py")]  # a generating vLLM
        render = [f"--ignore={regen[0]}", *tests_dir]
        for name, paths in (("vllm:render", render), ("vllm:regen", regen)):
            run = tests(name, newest, "cpu", "vllm", paths)
            jobs.append(Job(name, "test", run, (*needs, *vision_venv), GUESSES[name]))
        # make test-pipeline's tests; composite checkpoints are prepared on the vision venv
        run = tests("pipeline", newest, "cpu", "not pure", [str(ROOT / "tests" / "pipeline")])
        jobs.append(Job("pipeline", "test", run, (*needs, *vision_venv), GUESSES["pipeline"]))
    return jobs


def _version(release: str) -> tuple[int, ...]:
    """A release's version; upstream's main sorts after every release."""
    return (1 << 30,) if release == "main" else tuple(int(p) for p in re.findall(r"\d+", release))


def fix_table(states: dict[str, dict[str, str]], outcomes: dict[str, Outcome]) -> str:
    fixes = sorted({fix for found in states.values() for fix in found})
    lines = ["| release | " + " | ".join(fixes) + " | suite |", "|" + "---|" * (len(fixes) + 2)]
    for release, found in states.items():
        declared = TESTED_RELEASES[release].fixes if release in TESTED_RELEASES else {}
        cells = [
            found.get(fix, "?")
            + ("" if not declared or declared.get(fix) == found.get(fix) else
               f" (declared {declared.get(fix)})")
            for fix in fixes
        ]  # fmt: skip
        outcome = outcomes[f"suite:{release}"]
        verdict = ("pass" if outcome.ok else "FAIL") + f": {outcome.summary}"
        lines.append(f"| {release} | " + " | ".join(cells) + f" | {verdict} |")
    return "\n".join(lines)


def times_table(outcomes: list[Outcome], total: float) -> str:
    """Wall and CPU time of each part, and what an idle machine would take."""
    lines = ["part                  result    wall     cpu  from-to (s after start)"]
    for o in sorted(outcomes, key=lambda o: (o.started, o.name)):
        result = {True: "ok", False: "FAIL", None: "skip"}[o.ok]
        span = f"{o.started:5.0f}-{o.ended:5.0f}"
        cpu = _clock(CPU[o.name]) if o.name in CPU else "-"
        lines.append(f"{o.name:<21} {result:<6} {_clock(o.seconds):>7} {cpu:>7}  {span}  "
                     f"{o.summary[:60]}")  # fmt: skip
    used = sum(CPU.values())
    lines.append(f"{'total':<21} {'':<6} {_clock(total):>7} {_clock(used):>7}")
    cores = os.cpu_count() or 1
    lines.append(
        f"CPU time / {cores} cores = {_clock(used / cores)}: the floor for this run's wall time "
        "on an otherwise idle machine (wall above it means waiting: on builds, or on other load)"
    )
    return "\n".join(lines)


#: where a full run's times are written (block ``matrix-times``)
TIMES_DOC = ROOT / "docs" / "maintainers.md"


def record_times(table: str, result: str) -> None:
    """The last full run's times in docs/maintainers.md: when, at which commit, on what."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip() or "unknown"  # fmt: skip
    # an earlier full run may have left this block changed
    own = [f":!{TIMES_DOC.relative_to(ROOT)}"] if TIMES_DOC.is_relative_to(ROOT) else []
    status = ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *own]
    dirty = subprocess.run(status, cwd=ROOT, capture_output=True, text=True).stdout.strip()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    body = (
        f"Written by tools/matrix.py at the end of the last full `make test`: {when}, commit "
        f"{head}{' with local changes' if dirty else ''}, {os.cpu_count()} cores, load average "
        f"at the end {load} (other jobs may have shared the cores); `{result}`.\n\n"
        f"```\n{table}\n```"
    )
    doc_block.write(TIMES_DOC, "matrix-times", body)


def main_line(passed: int, failed: int, found: dict[str, str], outcomes: list[Outcome]) -> str:
    """``main: N passed, M failed``, then each fix whose state on upstream's main differs from the
    newest release's, and the test modules that failed there."""
    newest = max(TESTED_RELEASES, key=_version)
    declared = TESTED_RELEASES[newest].fixes
    fixes = [f"{fix} {found.get(fix, 'missing')} (on {newest}: {state})"
             for fix, state in declared.items() if found.get(fix) != state]  # fmt: skip
    log = LOGS / "suite-main.log"
    ran = any(o.name == "suite:main" and o.ok is not None for o in outcomes)  # a fresh log
    failing = re.findall(r"^(?:FAILED|ERROR) (tests/[^:\s]+)", log.read_text(), re.M) if (
        ran and log.is_file()) else []  # fmt: skip
    line = f"main: {passed} passed, {failed} failed"
    line += f"; fixes that differ: {', '.join(fixes)}" if fixes else "; every fix as on " + newest
    broken = [o.name for o in outcomes if o.ok is not True]  # a build of rel/main that failed
    line += f"; parts failed or not run: {', '.join(broken)}" if broken else ""
    return line + (f"; failing in {', '.join(sorted(set(failing)))}" if failing else "")


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK_RELEASES)}")
    parser.add_argument("--main", metavar="SOURCE", help="the suite on upstream's main from SOURCE")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="test passes at once")
    parser.add_argument("--build-jobs", type=int, default=1, help="builds at once (beside tests)")
    parser.add_argument("releases", nargs="*", help="default: every release in releases.py")
    split = argv.index("--") if "--" in argv else len(argv)
    own, pytest_args = argv[:split], argv[split + 1 :]
    args, unknown = parser.parse_known_args(own)
    pytest_args = unknown + pytest_args
    for release in args.releases:
        if not re.fullmatch(r"\d+(\.\d+)+", release):
            parser.error(f"not a release: {release!r} (pytest arguments go after --)")
    if args.main:  # tools/environments.py builds rel/main from it
        os.environ["SPECULATORS_GIT"] = args.main
    started = time.monotonic()
    states: dict[str, dict[str, str]] = {}

    def progress(o: Outcome) -> None:
        result = {True: "ok  ", False: "FAIL", None: "skip"}[o.ok]
        print(f"[{_clock(o.ended):>7}] {result} {o.name} ({_clock(o.seconds)}): {o.summary}",
              flush=True)  # fmt: skip

    jobs = plan(args, pytest_args, states)
    print(f"matrix: {len(jobs)} parts, {args.jobs} test and {args.build_jobs} build at a time; "
          f"logs in {LOGS.relative_to(ROOT)}/", flush=True)  # fmt: skip
    # a run narrowed by pytest arguments (-k, paths) times a part of the parts: not recorded
    slots = {"test": args.jobs, "build": args.build_jobs}
    outcomes = run_jobs(jobs, slots, venvs() / ".timings.json", progress, record=not pytest_args)
    by_name = {o.name: o for o in outcomes}
    total = time.monotonic() - started
    times = times_table(outcomes, total)
    print("\n" + times)
    ordered = {r: states[r] for r in sorted(states, key=_version)}
    rendered = fix_table(ordered, by_name)
    (BUILD / "matrix.md").write_text(rendered + "\n")
    print("\n" + rendered)
    for o in (o for o in outcomes if o.ok is False):
        log = LOGS / f"{o.name.replace(':', '-')}.log"
        tail = log.read_text().splitlines()[-15:] if log.is_file() else []
        print(f"\n-- {o.name} failed; last lines of {log.relative_to(ROOT)}:\n" + "\n".join(tail))
    tests = [counts(o.summary) for o in outcomes if o.kind == "test"]
    passed, failed = sum(p for p, _ in tests), sum(f for _, f in tests)
    broken = [o.name for o in outcomes if not o.ok]
    parts = f" ({len(broken)} parts failed or not run: {', '.join(broken)})" if broken else ""
    result = f"matrix: {passed} passed, {failed} failed{parts}"
    print(result)
    if args.main:
        print(main_line(passed, failed, states.get("main", {}), outcomes))
    if not (args.quick or args.releases or args.main or pytest_args):  # a full run: the record
        record_times(times, result)
        print(f"wrote the times into {TIMES_DOC.relative_to(ROOT)}")
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
