"""The cases of issue 45 through our ``regenerate-responses`` entry point, against the stand-in
server (tests/regen_stand_in.py: the prompt rendered by the model's own template).

``tools/release_python.sh 0.9.0 bench/regen_bad_day.py [--doc] [--only=CASE,...] [RELEASE ...]``
(as root: the full-disk case mounts a small tmpfs) prints one markdown table per release: the
case, the exit code, the rows on disk, the report (its counts, the settings it recorded) and the
last line printed; ``--doc`` writes docs/regenerate-responses.md's ``regen-bad-day`` block. Run
with the package of the base commit first on PYTHONPATH, it gives the "before" column.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tools"))

import regen_stand_in  # noqa: E402
from conftest import release_command  # noqa: E402
from interruptible import interruptible, send_ctrl_c  # noqa: E402
from regen_figures import _plain  # noqa: E402
from regen_outcomes import last_line as outcome_line  # noqa: E402
from regen_outcomes import rows as outcome_rows  # noqa: E402
from regen_stand_in import chat, tool_chat, wait_for_rows  # noqa: E402

from speculators_qwen_compat import demo  # noqa: E402

ENTRY = ("-m", "speculators_qwen_compat.regenerate_responses")
DOC = ROOT / "docs" / "regenerate-responses.md"
#: the cases, in the order they run (``--only NAME,...``)
CASES = ("settings", "disk", "refusals", "endpoint", "lines", "interrupt")
#: the stand-in's context (prompt tokens) for the grouped-refusals case
CONTEXT = 400


def write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


class Cases:
    def __init__(self, release: str, base: Path, url: str, model: Path) -> None:
        self.release, self.base, self.url, self.model = release, base, url, model

    def command(self, data: str, *extra: str, endpoint: str | None = None,
                max_tokens: str = "4096") -> tuple[list, dict]:  # fmt: skip
        return release_command(
            self.release, *ENTRY, "--endpoint", endpoint or self.url + "/v1/chat/completions",
            "--model", str(self.model), "--dataset", data, "--outfile", "out.jsonl",
            "--max-tokens", max_tokens, "--concurrency", "2", "--max-retries", "1", *extra,
        )  # fmt: skip

    def run(self, work: Path, data: str, *extra: str, **kw: str) -> tuple[int, str]:
        command, env = self.command(data, *extra, **kw)
        ran = subprocess.run(command, cwd=work, capture_output=True, text=True, env=env,
                             timeout=900)  # fmt: skip
        (work / "last.stderr").write_text(ran.stderr)
        return ran.returncode, last_line(ran.stdout, ran.stderr, ran.returncode)

    def folder(self, name: str) -> Path:
        work = self.base / self.release / name
        work.mkdir(parents=True)
        return work

    def all(self, only: str = "") -> list[tuple[str, int, str, str, str]]:
        self.out: list[tuple[str, int, str, str, str]] = []
        for name in only.split(",") if only else CASES:
            getattr(self, "case_" + name)()
        return self.out

    def add(self, case: str, work: Path, code: int, line: str) -> None:
        self.out.append((case, code, rows(work), report(work), line))
        print(f"| {' | '.join(map(str, self.out[-1]))} |", flush=True)

    def case_settings(self) -> None:
        # 1. --resume after changing --max-tokens, --model, --sampling-params
        work = self.folder("settings")
        write(work / "data.jsonl", [chat(f"s{i}", f"q {i}") for i in range(3)])
        self.run(work, "data.jsonl")
        write(work / "data.jsonl", [chat(f"s{i}", f"q {i}") for i in range(5)])
        code, line = self.run(work, "data.jsonl", "--resume", max_tokens="2048")
        self.add("--resume, --max-tokens 4096 -> 2048, data grown 3 -> 5", work, code, line)
        code, line = self.run(work, "data.jsonl", "--resume", "--sampling-params",
                              '{"top_p": 0.5}')  # fmt: skip
        self.add("--resume, --sampling-params changed", work, code, line)
        code, line = self.run(work, "data.jsonl", "--resume", "--allow-changed-settings",
                              max_tokens="2048")  # fmt: skip
        self.add("... with --allow-changed-settings", work, code, line)

    def case_disk(self) -> None:
        # 2. a full disk while conversations of three rows are written (five tries), then
        #    --resume with room
        for attempt in range(5):
            work = self.folder(f"disk-{attempt}")
            disk = work / "disk"
            disk.mkdir()
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(disk)],
                           check=True)  # fmt: skip
            try:
                # every fourth conversation refused (too long): its errors record is written
                # on the same full disk
                write(work / "data.jsonl", [
                    chat(f"t{i}", "word " * 2 * CONTEXT) if i % 4 == 3 else tool_chat(f"t{i}")
                    for i in range(40)
                ])  # fmt: skip
                limited = self.limited + "/v1/chat/completions"
                command, env = self.command(
                    str(work / "data.jsonl"), "--concurrency", "8", endpoint=limited
                )
                ran = subprocess.run(command, cwd=disk, capture_output=True, text=True,
                                     env=env, timeout=900)  # fmt: skip
                (work / "last.stderr").write_text(ran.stderr)
                tracebacks = ran.stderr.count("Traceback")
                line = last_line(ran.stdout, ran.stderr, ran.returncode)
                errs = errors_summary(disk)
                self.add(f"full disk, try {attempt + 1} (stderr: {tracebacks} tracebacks; errors "
                    f"file: {errs})", disk, ran.returncode, line)  # fmt: skip
                if attempt == 0:
                    subprocess.run(["mount", "-o", "remount,size=20m", str(disk)], check=True)
                    command, env = self.command(
                        str(work / "data.jsonl"), "--resume", endpoint=limited
                    )
                    ran = subprocess.run(command, cwd=disk, capture_output=True, text=True,
                                         env=env, timeout=900)  # fmt: skip
                    self.add("... then --resume with room", disk, ran.returncode,
                        last_line(ran.stdout, ran.stderr, ran.returncode))  # fmt: skip
            finally:
                subprocess.run(["umount", str(disk)], check=False)

    def case_refusals(self) -> None:
        # 3. seven context-length refusals, each with its own token count
        work = self.folder("refusals")
        long = [chat(f"l{i}", "word " * (CONTEXT + 40 * i)) for i in range(7)]
        write(work / "data.jsonl", [chat("ok", "hello"), *long])
        code, line = self.run(work, "data.jsonl", "--max-consecutive-failures", "0",
                              endpoint=self.limited + "/v1/chat/completions")  # fmt: skip
        self.add("7 context-length refusals, each its own token count", work, code, line)

    def case_endpoint(self) -> None:
        # 4. --endpoint as .../v1 and the bare host
        for form, endpoint in (("/v1", self.url + "/v1"), ("bare host", self.url)):
            work = self.folder("endpoint-" + form.replace("/", "").replace(" ", "-"))
            write(work / "data.jsonl", [chat(f"e{i}", f"q {i}") for i in range(2)])
            code, line = self.run(work, "data.jsonl", endpoint=endpoint)
            self.add(f"--endpoint {form}", work, code, line)

    def case_lines(self) -> None:
        # 5. one row with a lone surrogate, one malformed line, among good rows
        work = self.folder("bad-lines")
        good = [json.dumps(chat(f"g{i}", f"q {i}")) for i in range(3)]
        lines = [good[0], '{"id": "sur", "messages": [{"role": "user", "content": "a\\ud800b"}]}',
                 good[1], '{"id": "cut", "messages": [', good[2]]  # fmt: skip
        (work / "data.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        code, line = self.run(work, "data.jsonl")
        self.add("a lone surrogate and a malformed line among 3 good rows", work, code, line)

    def case_interrupt(self) -> None:
        # 6. Ctrl-C mid-run
        work = self.folder("interrupt")
        quick = [chat(f"i{i}", f"q {i}") for i in range(3)]
        write(work / "data.jsonl", [*quick, *(chat(f"w{i}", f"[slow] {i}") for i in range(3))])
        command, env = self.command("data.jsonl", "--concurrency", "1")
        # SIGINT at its default whatever this bench inherited (tests/interruptible.py)
        victim = subprocess.Popen(
            interruptible(command), cwd=work, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        wait_for_rows(victim, work / "out.partial.jsonl", 3)
        time.sleep(1.0)
        send_ctrl_c(victim)
        stdout, stderr = victim.communicate(timeout=120)
        (work / "last.stderr").write_text(stderr)
        self.add("Ctrl-C after 3 of 6 conversations", work, victim.returncode,
            last_line(stdout, stderr, victim.returncode))  # fmt: skip


def rows(work: Path) -> str:
    return outcome_rows(work, conversations=True)


def last_line(stdout: str, stderr: str, code: int) -> str:
    return outcome_line(stdout, stderr, code, width=500)


def report(work: Path) -> str:
    path = work / "out.jsonl.report.json"
    if not path.exists():
        return "none"
    value = json.loads(path.read_text())
    keys = (
        "exit_code",
        "regenerated",
        "cut_short",
        "already_done",
        "not_reached",
        "skipped",
        "failed",
    )
    parts = [f"{k} {json.dumps(value.get(k))}" for k in keys[:2]]
    parts += [f"{k} {json.dumps(value.get(k))}" for k in keys[2:] if value.get(k)]
    settings = value.get("settings") or {}
    if settings:
        parts.append("settings: " + json.dumps({k: settings.get(k) for k in
                                                ("max_tokens", "sampling_params")}))  # fmt: skip
    if value.get("earlier_settings"):
        parts.append(f"earlier_settings: {len(value['earlier_settings'])}")
    if value.get("data_changed"):
        parts.append("data_changed")
    return _plain("; ".join(parts))[:400]


def errors_summary(work: Path) -> str:
    records, torn, disk = 0, 0, 0
    for path in work.glob("*errors*.jsonl"):
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            torn += 1
        for line in data.splitlines():
            records += 1
            disk += b"OSError(28" in line or b"No space left" in line
    return f"{records} records, {disk} of the disk, {torn} torn"


def main(releases: list[str], only: str = "") -> list[str]:
    table: list[str] = []
    with tempfile.TemporaryDirectory(prefix="regen-bad-day-") as scratch:
        base = Path(scratch)
        model = demo.write_model(base / "model", "qwen36")
        served = regen_stand_in.StandIn(model)
        limited = regen_stand_in.StandIn(model, max_input_tokens=CONTEXT)
        try:
            for release in releases:
                head = f"#### speculators {release}\n\n| case | exit | rows | report | last line |"
                print("\n" + head + "\n|---|---|---|---|---|")
                cases = Cases(release, base, served.url, model)
                cases.limited = limited.url
                table += ["", head, "|---|---|---|---|---|"]
                table += [f"| {' | '.join(map(str, row))} |" for row in cases.all(only)]
        finally:
            served.close()
            limited.close()
    return table


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    chosen = [a for a in sys.argv[1:] if not a.startswith("--")]
    only = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--only=")), "")
    block = main(chosen or ["0.9.0"], only)
    if "--doc" in sys.argv[1:]:
        import doc_block

        doc_block.write(DOC, "regen-bad-day", "\n".join(block).strip())
