"""Before and after for issue 29: each shape of tests/regen_data.py through ``regenerate-responses``
as upstream ships it (fixes off) and through our entry point, against a real vLLM 0.32 on CPU.

``python bench/regen_figures.py [RELEASE ...]`` (run by the checkout's venv, e.g.
``tools/release_python.sh 0.9.0 bench/regen_figures.py 0.8.1 0.9.0``): builds the tiny Qwen3.5
hybrid, serves it (tests/vllm_server.py ``serve_generation``, steered by tests/regen_proxy.py),
runs both commands per release, then the same command again (a rerun) and the command against
a dead server, and prints a markdown table per release: per conversation the rows written and
what was recorded (the errors file, the report), and each run's exit code and last line. With
``--doc`` the tables also replace docs/regenerate-responses.md's ``regen-figures`` block
(tools/doc_block.py). The outside-world cases of issue 33 are bench/regen_faults.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import regen_data  # noqa: E402
import tiny_checkpoints  # noqa: E402
import vllm_server  # noqa: E402
from conftest import FIXES_OFF, release_command  # noqa: E402
from regen_proxy import Proxy  # noqa: E402

ENTRY = ("-m", "speculators_qwen_compat.regenerate_responses")
UPSTREAM = ("-m", "speculators", "regenerate-responses")


def run(release: str, cwd: Path, endpoint: str, model: Path, upstream: bool, out: str,
        *extra: str) -> subprocess.CompletedProcess:  # fmt: skip
    command, env = release_command(
        release, *(UPSTREAM if upstream else ENTRY), "--endpoint",
        endpoint + "/v1/chat/completions", "--model", str(model), "--dataset", "data.jsonl",
        "--outfile", out, "--max-tokens", str(regen_data.MAX_TOKENS), "--concurrency", "2",
        *extra, **(FIXES_OFF if upstream else {}),
    )  # fmt: skip
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)


def last_line(ran: subprocess.CompletedProcess) -> str:
    """The run's summary: ours is its last line; upstream's is "Pipeline complete ..."."""
    lines = ran.stdout.strip().splitlines() if ran.returncode == 0 else []
    lines = (
        [ln for ln in lines if ln.startswith("regenerated ")]
        or [ln for ln in lines if ln.startswith("Pipeline complete")]
        or lines
    )
    lines = lines or ran.stderr.strip().splitlines() or [""]
    return _plain(lines[-1][:600])


def _plain(text: str) -> str:
    """Table-safe, without the run's port numbers."""
    text = re.sub(r"http://127\.0\.0\.1:\d+", "URL", text)
    return re.sub(r"127\.0\.0\.1:?', \d+|127\.0\.0\.1:\d+", "PORT", text).replace("|", "/")


def outcome(work: Path, out: str) -> dict[str, str]:
    path = work / out
    rows = Counter(
        json.loads(line)["primary_id"] for line in path.read_text().splitlines()
    ) if path.exists() else Counter()  # fmt: skip
    errors_file = path.with_name(f"{path.stem}.errors{path.suffix}")
    errors = {}
    if errors_file.exists():
        for line in errors_file.read_text().splitlines():
            entry = json.loads(line)
            errors[entry["id"]] = _plain(entry["metadata"]["error"])[:110]
    report_file = path.with_name(f"{path.name}.report.json")
    report = json.loads(report_file.read_text()) if report_file.exists() else {}
    counted = {}
    for key in ("cut_short", "skipped", "failed"):
        for reason in report.get(key, {}):
            counted.setdefault(key, []).append(reason)
    result = {}
    for conv, expected in regen_data.EXPECTED.items():
        cell = f"{rows[conv]} rows"
        if conv in errors:
            cell += f"; errors file: {errors[conv]}"
        elif not rows[conv]:
            cell += "; no record"
        if report:
            kind = expected[0]
            if kind in ("cut", "skipped", "failed"):
                key = {"cut": "cut_short", "skipped": "skipped", "failed": "failed"}[kind]
                match = [r for r in counted.get(key, []) if expected[1] in r]
                cell += f"; counted {key}: {match[0] if match else '?'}"
            else:
                cell += "; counted regenerated"
        result[conv] = cell.replace("|", "/")
    return result


DOC = ROOT / "docs" / "regenerate-responses.md"
_out: list[str] = []


def say(line: str = "") -> None:
    print(line, flush=True)
    _out.append(line)


def write_doc() -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    import doc_block

    doc_block.write(DOC, "regen-figures", "\n".join(_out).strip())


def main(releases: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="regen-figures-") as scratch:
        base = Path(scratch)
        model = tiny_checkpoints.write_checkpoint(
            base / "model", "qwen35_text", sizes=tiny_checkpoints.VLLM, bf16=True
        )
        with vllm_server.serve_generation(model) as server:
            proxy = Proxy(server.url)
            try:
                for release in releases:
                    work = base / release
                    work.mkdir()
                    regen_data.write(work / "data.jsonl")
                    before = run(release, work, proxy.url, model, True, "before.jsonl")
                    after = run(release, work, proxy.url, model, False, "after.jsonl")
                    shapes_before = outcome(work, "before.jsonl")
                    shapes_after = outcome(work, "after.jsonl")
                    rerun_before = run(release, work, proxy.url, model, True, "before.jsonl")
                    rerun_after = run(release, work, proxy.url, model, False, "after.jsonl")
                    dead = f"http://127.0.0.1:{vllm_server.free_port()}"
                    dead_before = run(release, work, dead, model, True, "dead-b.jsonl",
                                      "--max-retries", "0")  # fmt: skip
                    dead_after = run(release, work, dead, model, False, "dead-a.jsonl",
                                     "--max-retries", "0")  # fmt: skip
                    say(f"\n#### speculators {release}\n")
                    say("| conversation | before (upstream as shipped) | after (ours) |")
                    say("|---|---|---|")
                    for conv in regen_data.EXPECTED:
                        say(f"| {conv} | {shapes_before[conv]} | {shapes_after[conv]} |")
                    say("\n| run | before: exit, last line | after: exit, last line |")
                    say("|---|---|---|")
                    for label, b, a in (
                        (f"the {len(regen_data.EXPECTED)} conversations", before, after),
                        ("the same command again", rerun_before, rerun_after),
                        ("no server at --endpoint", dead_before, dead_after),
                    ):
                        say(f"| {label} | {b.returncode}: {last_line(b)} | "
                              f"{a.returncode}: {last_line(a)} |")  # fmt: skip
                    reruns = Counter(
                        json.loads(line)["primary_id"]
                        for line in (work / "before.jsonl").read_text().splitlines()
                    )
                    say(
                        f"\nupstream's rerun: {sum(reruns.values())} rows in before.jsonl, "
                        f"{sum(1 for n in reruns.values() if n > 1)} conversations twice"
                    )
            finally:
                proxy.close()


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if a != "--doc"]
    main(arguments or ["0.9.0"])
    if "--doc" in sys.argv[1:]:
        write_doc()
