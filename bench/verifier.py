"""The acceptance bench's trained verifiers: trained once per machine, kept by their recipe's hash.

``trained(kind, logs)`` returns the folder of a tiny verifier that learned bench/verifier_corpus.py
(bench/verifier_train.py; the composite Qwen3.6 class wraps the trained dense weights), checked
through vLLM (bench/verifier_check.py: bf16 greedy = float32 greedy on >= ``GOAL`` of held-out
prompts). Kept in ``$VENVS/verifiers/KIND-HASH``; the hash covers every file the recipe reads.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import vllm_server  # noqa: E402
from acceptance_run import ONE_SERVER, RELEASE_PYTHON, fail, release_env, run  # noqa: E402

#: VERIFIER_SMOKE_STEPS (bench/verifier_train.py) cuts training to test the bench's plumbing:
#: such verifiers are kept apart and the goal is not enforced on them
SMOKE = bool(os.environ.get("VERIFIER_SMOKE_STEPS"))
CACHE = vllm_server.VENVS / ("verifiers-smoke" if SMOKE else "verifiers")
RELEASE = "0.9.0"  # whose transformers trains them (bench/acceptance.py DATA_RELEASE)
DENSE, MOE, COMPOSITE = "qwen3_5_text", "qwen3_5_moe_text", "qwen3_5"
#: one training per kind at a time in this process (the bench's cases ask side by side)
_TRAINING: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
#: vLLM's bf16 greedy text equals transformers' float32 greedy text on at least this share
GOAL = 0.9
#: what the recipe reads: a change to any of them trains anew
RECIPE = (
    "bench/verifier_train.py", "bench/verifier_corpus.py", "bench/verifier_check.py",
    "tests/tiny_checkpoints.py", "tests/pipeline/models.py", "tests/verifier_text.py",
    "speculators_qwen_compat/demo/__init__.py",
    "speculators_qwen_compat/demo/strict_chat_template.jinja",
    "speculators_qwen_compat/demo/tiny-qwen36/tokenizer.json",
    "speculators_qwen_compat/demo/tiny-qwen36/tokenizer_config.json",
    "speculators_qwen_compat/demo/tiny-qwen36/chat_template.jinja",
)  # fmt: skip


def recipe_hash(kind: str) -> str:
    digest = hashlib.sha256(f"{kind} {RELEASE} {vllm_server.VLLM_VERSION}".encode())
    for name in RECIPE:
        digest.update((ROOT / name).read_bytes())
    return digest.hexdigest()[:12]


def trained(kind: str, logs: Path) -> Path:
    """The verifier ``kind``, trained and checked (once: a later call finds it by its hash)."""
    folder = CACHE / f"{kind}-{recipe_hash(kind)}"
    CACHE.mkdir(parents=True, exist_ok=True)
    # one training per kind: threads of this run by a lock, other runs on the machine by a
    # file lock (the second waits, then finds the verifier the first kept)
    with _TRAINING[kind], (CACHE / f".{folder.name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "vllm_check.json").is_file():
            _train(kind, folder, logs)
    return folder


def _train(kind: str, folder: Path, logs: Path) -> None:
    # trained into a folder of its own, checked, then renamed into place in whole: a run killed
    # while training leaves no training.json (trained anew), one killed while checking is
    # checked again without training
    built = folder.with_name(f".{folder.name}.trained")
    if not (built / "training.json").is_file():
        shutil.rmtree(built, ignore_errors=True)
        if kind == COMPOSITE:
            dense = trained(DENSE, logs)
            command = [str(RELEASE_PYTHON), RELEASE, "vision",
                       str(ROOT / "bench" / "verifier_train.py"), "composite", str(dense),
                       str(built)]  # fmt: skip
        else:
            command = [str(RELEASE_PYTHON), RELEASE, str(ROOT / "bench" / "verifier_train.py"),
                       kind, str(built)]  # fmt: skip
        run(command, logs / f"verifier-{kind}.log", release_env(True))
    check = vllm_check(built, kind, logs)
    if check["agrees"] < GOAL and not SMOKE:
        fail(f"vLLM's bf16 text equals transformers' float32 text on {check['agrees']:.0%} "
             f"of the held-out prompts for the trained {kind} verifier ({built}), under the "
             f"{GOAL:.0%} goal: train it longer (bench/verifier_train.py)")  # fmt: skip
    (built / "vllm_check.json").write_text(json.dumps(check, indent=1))
    built.rename(folder)


def vllm_check(folder: Path, kind: str, logs: Path) -> dict:
    """bench/verifier_check.py's figures (the replies themselves left out)."""
    command = [str(vllm_server.VLLM_PYTHON), str(ROOT / "bench" / "verifier_check.py"),
               str(folder)]  # fmt: skip
    with ONE_SERVER, tempfile.TemporaryDirectory(prefix="sqc-vllm-") as scratch:
        env = vllm_server.vllm_env(Path(scratch), torchvision=True)  # qwen3_5 imports qwen3_vl
        out = run(command, logs / f"verifier-check-{kind}.log", env)
    line = next((x for x in out.splitlines() if x.startswith("VERIFIER ")), None)
    if line is None:
        fail(f"bench/verifier_check.py printed no result (log {logs}/verifier-check-{kind}.log)")
    result = json.loads(line[len("VERIFIER ") :])
    result.pop("vllm", None)
    training = json.loads((folder / "training.json").read_text())
    return {**training, "vllm_agrees": result["agrees"], "agrees": result["agrees"],
            "prompts": result["prompts"]}  # fmt: skip


def main(kinds: list[str]) -> None:
    """Train (or find) each verifier named, side by side, and print where each is."""
    logs = ROOT / "build" / "acceptance" / "logs"
    with ThreadPoolExecutor(max_workers=len(kinds)) as pool:
        for kind, folder in zip(kinds, pool.map(lambda k: trained(k, logs), kinds), strict=True):
            print(f"{kind}: {folder}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or [DENSE, MOE, COMPOSITE])
