"""The outside-world cases of issue 33 through our ``regenerate-responses`` entry point, against a
real vLLM 0.32 on CPU behind tests/regen_proxy.py (a gateway answering 504 for one conversation
and never answering another).

``tools/release_python.sh 0.9.0 bench/regen_faults.py [--doc] [--old] RELEASE ...``: builds the
tiny Qwen3.5 hybrid, serves it once, and per release runs each case in its own folder, printing a
markdown table: the case, the exit code, the rows on disk (in ``--outfile``, else in the partial
file; ``dup`` conversations written twice, ``bad`` lines that are not JSON) and the last line
printed. ``--old`` leaves out the flags the entry point did not have before issue 33
(``--request-timeout``): run from a checkout of the base commit, it gives the "before" column.
With ``--doc`` the tables replace docs/regenerate-responses.md's ``regen-faults`` block.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tools"))

import regen_data  # noqa: E402
import regen_proxy  # noqa: E402
import tiny_checkpoints  # noqa: E402
import vllm_server  # noqa: E402
from conftest import release_command  # noqa: E402
from regen_outcomes import last_line, rows  # noqa: E402

ENTRY = ("-m", "speculators_qwen_compat.regenerate_responses")
DOC = ROOT / "docs" / "regenerate-responses.md"
#: how long the stand-in gateway holds a request it never answers (bounds the "before" run)
HANG = 30.0
TIMEOUT = ("--request-timeout", "5")


def chats(prefix: str, count: int) -> list[dict]:
    return [{"id": f"{prefix}-{i}", "messages": [{"role": "user", "content": f"q {prefix} {i}"}]}
            for i in range(count)]  # fmt: skip


def user(conv_id: str, text: str) -> dict:
    return {"id": conv_id, "messages": [{"role": "user", "content": text}]}


def write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


class Cases:
    def __init__(self, release: str, base: Path, endpoint: str, model: Path, old: bool) -> None:
        self.release, self.base, self.endpoint, self.model = release, base, endpoint, model
        self.old = old

    def command(self, data: str, *extra: str, endpoint: str | None = None) -> tuple[list, dict]:
        return release_command(
            self.release, *ENTRY, "--endpoint", (endpoint or self.endpoint) +
            "/v1/chat/completions", "--model", str(self.model), "--dataset", data,
            "--outfile", "out.jsonl", "--max-tokens", str(regen_data.MAX_TOKENS),
            "--concurrency", "1", "--max-retries", "1", *extra,
        )  # fmt: skip

    def run(self, work: Path, data: str, *extra: str, endpoint: str | None = None) -> tuple:
        command, env = self.command(data, *extra, endpoint=endpoint)
        ran = subprocess.run(command, cwd=work, capture_output=True, text=True, env=env,
                             timeout=1800)  # fmt: skip
        return ran.returncode, last_line(ran.stdout, ran.stderr, ran.returncode)

    def folder(self, name: str) -> Path:
        work = self.base / self.release / name
        work.mkdir(parents=True)
        return work

    def timeout(self) -> tuple[str, ...]:
        return () if self.old else TIMEOUT

    def all(self) -> list[tuple[str, int, str, str]]:
        out = []
        # 1. resume over data sharing nothing with the output, nothing new regenerated
        work = self.folder("resume-other")
        write(work / "first.jsonl", chats("ok", 3))
        self.run(work, "first.jsonl")
        no_user = {"id": "y", "messages": [{"role": "assistant", "content": "hi"}]}
        write(work / "other.jsonl", [user("x", "again [504]"), no_user])
        code, line = self.run(work, "other.jsonl", "--resume")
        out.append(("--resume over data sharing nothing (nothing new)", code, rows(work), line))
        # 2. one conversation answered 504 on every try, then --resume
        work = self.folder("gateway")
        write(work / "data.jsonl", [*chats("ok", 3), user("gw", "slow [504]")])
        code, line = self.run(work, "data.jsonl")
        out.append(("one conversation 504 on every try", code, rows(work), line))
        code, line = self.run(work, "data.jsonl", "--resume")
        out.append(("... then --resume", code, rows(work), line))
        # 3. one request never answered
        work = self.folder("never")
        write(work / "data.jsonl", [*chats("ok", 3), user("hang", "stuck [hang]")])
        started = time.monotonic()
        code, line = self.run(work, "data.jsonl", *self.timeout())
        waited = f" [{time.monotonic() - started:.0f} s]"
        out.append(("one request never answered" + waited, code, rows(work), line))
        # 4. rows upstream regenerates: a reply with weight 0, call arguments not JSON,
        #    messages without a user turn (--prompt-field)
        work = self.folder("replies")
        wanted = ("weight-zero", "bad-arguments", "prompt-fallback", "long-first")
        shapes = [r for r in regen_data.rows() if r["id"] in wanted]
        write(work / "data.jsonl", shapes)
        code, line = self.run(work, "data.jsonl")
        out.append(("weight 0, bad arguments, no user turn, thinking cut", code, rows(work), line))
        # 5. two --resume runs at once
        work = self.folder("two")
        write(work / "data.jsonl", chats("two", 6))
        command, env = self.command("data.jsonl", "--resume")
        both = [subprocess.Popen(command, cwd=work, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for _ in range(2)]  # fmt: skip
        ended = [(p.wait(timeout=1800), *p.communicate()) for p in both]
        lines = " // ".join(f"{c}: {last_line(o, e, c)}" for c, o, e in ended)
        out.append(("two --resume runs at once", max(c for c, _, _ in ended), rows(work), lines))
        # 6. SIGKILL mid-run (a torn last line), then --resume
        work = self.folder("kill")
        write(work / "data.jsonl", chats("kill", 8))
        command, env = self.command("data.jsonl")
        victim = subprocess.Popen(command, cwd=work, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)  # fmt: skip
        partial = work / "out.partial.jsonl"
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and victim.poll() is None:
            if partial.exists() and len(partial.read_bytes().splitlines()) >= 2:
                break
            time.sleep(0.1)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        with partial.open("ab") as file:
            file.write(b'{"id": "kill-7_gen0", "primary_id": "kill-7", "input_ids": [1, 2')
        code, line = self.run(work, "data.jsonl", "--resume")
        out.append(("SIGKILL + torn last line, then --resume", code, rows(work), line))
        # 7. a stopped run's counts (no server: every conversation of regen_data.py in)
        work = self.folder("dead")
        regen_data.write(work / "data.jsonl")
        dead = f"http://127.0.0.1:{vllm_server.free_port()}"
        code, line = self.run(work, "data.jsonl", endpoint=dead)
        out.append((f"no server, {len(regen_data.rows())} conversations", code, rows(work), line))
        return out


def main(releases: list[str], old: bool) -> list[str]:
    table: list[str] = []
    regen_proxy.HANG_SECONDS = HANG
    with tempfile.TemporaryDirectory(prefix="regen-faults-") as scratch:
        base = Path(scratch)
        model = tiny_checkpoints.write_checkpoint(
            base / "model", "qwen35_text", sizes=tiny_checkpoints.VLLM, bf16=True
        )
        with vllm_server.serve_generation(model) as server:
            proxy = regen_proxy.Proxy(server.url)
            try:
                for release in releases:
                    table += [
                        f"\n#### speculators {release}\n",
                        "| case | exit | rows | last line |",
                    ]
                    table.append("|---|---|---|---|")
                    for case, code, written, line in Cases(release, base, proxy.url, model,
                                                           old).all():  # fmt: skip
                        table.append(f"| {case} | {code} | {written} | {line} |")
                        print(table[-1], flush=True)
            finally:
                proxy.close()
    return table


if __name__ == "__main__":
    flags = {"--doc", "--old"}
    arguments = [a for a in sys.argv[1:] if a not in flags]
    block = main(arguments or ["0.9.0"], "--old" in sys.argv[1:])
    print("\n".join(block))
    if "--doc" in sys.argv[1:]:
        import doc_block

        doc_block.write(DOC, "regen-faults", "\n".join(block).strip())
