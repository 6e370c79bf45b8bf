"""Acceptance bench, step 1b: the training rows' hidden states as vLLM extracts them (bf16).

Users train on what ``speculators generate-offline-data`` gets from vLLM serving the verifier in
bf16 (README step 6), not on transformers' float32 forward; a drafter served by vLLM then sees
the same verifier it trained on. ``vllm_states(data, work, layer_ids)`` copies the training rows
of bench/acceptance_data.py (``data/train``: the Arrow dataset, without its ``hidden_states``)
to ``data/train-vllm``, serves the verifier with hidden-state extraction (tests/vllm_server.py
``serve_hidden_states``: the README's ``--speculative-config`` of ``extract_hidden_states``, the
CPU connector, as tests/pipeline does) and runs upstream's ``generate-offline-data
--validate-outputs --fail-on-error`` (speculators 0.9.0, the release that built the data) into
``data/train-vllm/hidden_states``. Once per verifier; the server is stopped before training.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import vllm_server
from acceptance_run import ONE_SERVER, RELEASE_PYTHON, fail, release_env, run

RELEASE = "0.9.0"  # bench/acceptance.py DATA_RELEASE
FOLDER = "train-vllm"
DONE = "states.json"  # written last: a folder without it is redone from the start


def vllm_states(data: Path, work: Path, layer_ids: list[int]) -> Path:
    """``data/train-vllm``: the rows of ``data/train`` with vLLM's hidden states of
    ``layer_ids`` (the aux layers, then the last layer's pre-norm output)."""
    out = data / FOLDER
    if (out / DONE).is_file():
        return out
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(data / "train", out, ignore=shutil.ignore_patterns("hidden_states"))
    rows = json.loads((data / "data.json").read_text())["train"]
    verifier = (data / "verifier").resolve()
    log = work / "logs" / f"states-{data.name}.log"
    with (
        ONE_SERVER,
        vllm_server.serve_hidden_states(
            verifier, layer_ids, data / "vllm-out", hybrid=True
        ) as server,
    ):
        command = [
            str(RELEASE_PYTHON), RELEASE, "-m", "speculators", "generate-offline-data",
            "--endpoint", server.endpoint, "--model", str(verifier),
            "--preprocessed-data", str(out), "--concurrency", "4",
            "--validate-outputs", "--fail-on-error",
        ]  # fmt: skip
        try:
            run(command, log, release_env(True))
        except SystemExit:
            shutil.copyfile(server.log, work / "logs" / f"states-{data.name}-server.log")
            raise
    files = len(list((out / "hidden_states").glob("hs_*.safetensors")))
    if files != rows:
        fail(f"generate-offline-data wrote {files} hidden-state files of {rows} rows (log {log})")
    (out / DONE).write_text(json.dumps({"rows": rows, "layer_ids": layer_ids}))
    return out
