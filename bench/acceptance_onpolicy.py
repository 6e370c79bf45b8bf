"""Acceptance bench, the on-policy arm's data: placeholder replies as given, or the verifier's own.

Users curate prompts for a drafter and, to get past Qwen3.6's strict template, fill each
assistant turn with a placeholder ("OK."); upstream's answer is on-policy regeneration,
``speculators regenerate-responses`` (0.8.1, 0.9.0), which asks a vLLM server serving the target
for its own replies and writes speculator-format rows (``input_ids``, ``loss_mask`` from the
server's token ids) for prepare_data. ``build(verifier, work, size)`` makes both training sets
from the same prompts, each in speculators' offline layout (bench/acceptance.py trains the same
drafter on each and judges both on the same held-out chat prompts):

1. bench/acceptance_chat.py ``prompts``: the prompts, the placeholder conversations, the
   held-out chat rows;
2. ``placeholder``: the conversations as the user has them;
   ``regenerated``: vLLM 0.32 (CPU) serves the verifier with a deployment's flags
   (tests/vllm_server.py ``serve_generation``) and our ``regenerate-responses`` (``python -m
   speculators_qwen_compat.regenerate_responses``, upstream's command with the fixes on, as the
   README tells users to run it) replaces each reply with the verifier's greedy one, thinking off
   (as the held-out prompts are rendered), at most NEW tokens; the server is stopped before
   anything else runs;
3. each through ``python -m speculators_qwen_compat.prepare_data`` (fixes on), then
   bench/acceptance_chat.py ``states``: transformers' float32 hidden states, as the cases'.

Regenerated replies are longer than placeholders, so the same epochs give the regenerated set
more training steps: bench/acceptance.py also trains on it for the placeholder's step count
(``--max-steps``), the comparison at equal steps.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import vllm_server  # noqa: E402
from acceptance_run import ONE_SERVER, RELEASE_PYTHON, fail, release_env, run  # noqa: E402

RELEASE = "0.9.0"  # bench/acceptance.py DATA_RELEASE: its transformers built the verifier
#: our entry point: upstream's command with the fixes on (README "On-policy replies")
REGENERATE = ["-m", "speculators_qwen_compat.regenerate_responses"]
#: greedy (no "seed": it crashes vLLM's CPU engine), thinking off (see the docstring)
SAMPLING = {"temperature": 0, "chat_template_kwargs": {"enable_thinking": False}}
KEYS = ("placeholder", "regenerated")
CHAT = "chat"  # the arm's folder of prompts and held-out rows (bench/acceptance_chat.py)


def chat_data(verifier: Path, arm: Path, size: dict) -> Path:
    """The prompts, the placeholder conversations and the held-out chat rows (once)."""
    chat = arm / CHAT
    if not (chat / "data.json").is_file():
        numbers = [size["train"], size["heldout"], size["new"]]
        command = [str(RELEASE_PYTHON), RELEASE, str(ROOT / "bench" / "acceptance_chat.py"),
                   "prompts", str(verifier), str(chat), *map(str, numbers)]  # fmt: skip
        out = run(command, arm / "logs" / "chat-prompts.log", release_env(True))
        (chat / "data.json").write_text(out.strip().splitlines()[-1])
    link = chat / "verifier"  # bench/acceptance.py finds the verifier beside the held-out rows
    if not link.exists():
        link.symlink_to(verifier)
    return chat


def regenerate(verifier: Path, conversations: Path, out: Path, arm: Path, size: dict) -> dict:
    """``regenerate-responses`` against vLLM serving the verifier; its summary line."""
    errors = out.with_name(f"{out.stem}.errors{out.suffix}")
    for stale in (out, errors, out.with_name(f"{out.stem}.partial{out.suffix}"),
                  out.with_name(f"{out.name}.report.json")):  # fmt: skip
        stale.unlink(missing_ok=True)  # a fresh run each time (ours refuses an existing one)
    with ONE_SERVER, vllm_server.serve_generation(verifier, max_model_len=512) as server:
        command = [
            str(RELEASE_PYTHON), RELEASE, *REGENERATE,
            "--endpoint", server.endpoint + "/chat/completions", "--model", str(verifier),
            "--dataset", str(conversations), "--outfile", str(out),
            "--max-tokens", str(size["new"]), "--concurrency", "16",
            "--sampling-params", json.dumps(SAMPLING),
        ]  # fmt: skip
        log = arm / "logs" / "regenerate.log"
        try:
            printed = run(command, log, release_env(True))
        except SystemExit:
            shutil.copyfile(server.log, arm / "logs" / "regenerate-server.log")
            raise
    rows, failed = json_lines(out), json_lines(errors)
    if failed or len(rows) != size["train"]:
        fail(f"regenerate-responses wrote {len(rows)} rows of {size['train']} and "
             f"{len(failed)} failures ({errors}; log {log})")  # fmt: skip
    summary = next((x for x in printed.splitlines() if x.startswith("regenerated ")), "")
    return {"rows": len(rows), "summary": summary}


def json_lines(path: Path) -> list[dict]:
    """A JSON-lines file's records (split at newlines only: a reply may hold U+2028 and the
    like, which ``str.splitlines`` also splits at); none for a missing file."""
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def prepared(verifier: Path, source: Path, key: str, arm: Path, size: dict) -> dict:
    """``source`` through prepare_data (fixes on) and transformers' states into ``arm/key``."""
    folder = arm / key
    shutil.rmtree(folder, ignore_errors=True)
    command = [str(RELEASE_PYTHON), RELEASE, "-m", "speculators_qwen_compat.prepare_data",
               "--model", str(verifier), "--data", str(source),
               "--output", str(folder / "prepared"), "--seq-length", str(size["seq_len"]),
               "--num-preprocessing-workers", "1"]  # fmt: skip
    run(command, arm / "logs" / f"prepare-{key}.log", release_env(True))
    states = [str(RELEASE_PYTHON), RELEASE, str(ROOT / "bench" / "acceptance_chat.py"),
              "states", str(verifier), str(folder / "prepared"), str(folder / "train")]  # fmt: skip
    out = run(states, arm / "logs" / f"states-{key}.log", release_env(True))
    return {**json.loads(out.strip().splitlines()[-1]), "train": folder / "train"}


def build(verifier: Path, work: Path, size: dict) -> tuple[Path, dict[str, dict]]:
    """The held-out folder and, per key, the training data (``train``) and its counts."""
    arm = work / "onpolicy"
    chat = chat_data(verifier, arm, size)
    conversations = chat / "conversations.jsonl"
    regenerated = arm / "regenerated.jsonl"
    summary = regenerate(verifier, conversations, regenerated, arm, size)
    print(f"on-policy arm, regenerate-responses: {json.dumps(summary)}", flush=True)
    data = {key: prepared(verifier, source, key, arm, size)
            for key, source in zip(KEYS, (conversations, regenerated), strict=True)}  # fmt: skip
    return chat, data


def describe(size: dict) -> str:
    """The arm's part of the bench's closing note."""
    return (
        f"Placeholder vs regenerated: {size['train']} one-turn prompts of the verifier's corpus "
        "(other draws) with the placeholder replies users write ('OK.', 'Sure.', 'Got it.'), or "
        "with the replies our `regenerate-responses` (speculators "
        f"{RELEASE}'s command, fixes on) got from vLLM serving the verifier (greedy, thinking off, "
        f"at most {size['new']} tokens); each through prepare_data (fixes on) and the verifier's "
        "states, the same drafter trained on each with the fixes on (the same epochs; the second "
        "table: the regenerated set trained for the placeholder's number of steps, "
        f"`--max-steps`); judged on {size['heldout']} held-out prompts in the chat template "
        "(thinking off) continued by the verifier's greedy replies, offline and by vLLM as above."
    )
