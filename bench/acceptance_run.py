"""Acceptance bench: how its steps run (a release's Python, the environment, a failing step).

Shared by bench/acceptance.py (the cases) and bench/acceptance_onpolicy.py (the on-policy arm's
data). A step's output goes to its log; a step that fails ends the bench with the bench's one
error line and the log's end (an infrastructure fault, never a figure).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

#: One vLLM server at a time, for every step of the bench that starts one (states, the on-policy
#: arm's generation, the acceptance counts): each reserves its KV cache and loads the verifier,
#: and cases run side by side (--jobs) would otherwise start several at once, run out of memory
#: and be counted as refusals ("Available memory ... is less than requested memory for kv").
ONE_SERVER = threading.Lock()

ROOT = Path(__file__).resolve().parents[1]
RELEASE_PYTHON = ROOT / "tools" / "release_python.sh"


def fail(message: str) -> None:
    sys.exit(f"speculators_qwen_compat: error: {message}")


def run(
    command: list[str], log: Path, env: dict[str, str] | None = None, result_tag: str = ""
) -> str:
    """Run ``command``, its output into ``log``; its stdout's text, or exit with the log's end.

    With ``result_tag``, a step killed by a signal after it printed its ``TAG {json}`` line (its
    last act) has its result kept, with a warning: vLLM 0.32's CPU engine now and then aborts
    in its own teardown ("terminate called without an active exception", SIGABRT)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as sink:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=sink, text=True, env=env)
        sink.write(done.stdout)
    if done.returncode < 0 and result_tag and _printed_result(done.stdout, result_tag):
        print(f"warning: {' '.join(command[:2])} died by signal {-done.returncode} after it "
              f"printed its {result_tag} line (teardown); its result is kept (log {log})",
              file=sys.stderr, flush=True)  # fmt: skip
        return done.stdout
    if done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        fail(f"{' '.join(command[:4])} ... exited {done.returncode} (log {log}):\n{tail}")
    return done.stdout


def tagged(stdout: str, tag: str) -> str | None:
    """The text after ``TAG `` on the first line of ``stdout`` that starts with it, or None."""
    line = next((x for x in stdout.splitlines() if x.startswith(f"{tag} ")), None)
    return None if line is None else line[len(tag) + 1 :]


def _printed_result(stdout: str, tag: str) -> bool:
    """Whether ``stdout`` holds a whole ``TAG {json}`` line."""
    text = tagged(stdout, tag)
    if text is None:
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def release_env(fixes: bool, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECULATORS_QWEN_COMPAT")}
    path = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    # One thread per process: the cases run side by side, and on a busy machine OpenMP's
    # spinning worker threads made a training step ~10x slower.
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONPATH"] = path
    if not fixes:
        env["SPECULATORS_QWEN_COMPAT"] = "0"
    env.update(extra)
    return env
