"""The pipeline tier's shared stages, one target model at a time (``make test-pipeline``).

For each model kind (tests/pipeline/models.py) the session fixture ``stage`` builds the
checkpoint, runs our prepare_data on the tool-call/reasoning data and, for a composite checkpoint,
conversations about generated PNGs (on the vision venv, through its AutoProcessor), starts one
real vLLM with hidden-state extraction (reading the images: ``--allowed-local-media-path``) and
runs upstream's ``speculators generate-offline-data --validate-outputs`` against it.
Every test of that kind reuses the server (offline generation, online training, doctor); it is
stopped before the next kind's starts. Runs in the 0.9.0 release venv
(tools/release_python.sh 0.9.0 ... -m pytest tests/pipeline).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import cpu_trainer
import pytest
import vllm_server
from vllm_server import VllmServer

from .data import IMAGES, conversations, image_conversations, write_jsonl
from .models import COMPOSITE, HYBRID, KINDS, NUM_LAYERS, build_target

#: What the server extracts: speculators' default EAGLE-3 layers for 8 layers, and the last.
AUX_LAYERS = [2, NUM_LAYERS // 2, NUM_LAYERS - 3]
LAYER_IDS = [*AUX_LAYERS, NUM_LAYERS]
SEQ_LENGTH = 256
ROOT = Path(__file__).resolve().parents[2]


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("SPECULATORS_QWEN_COMPAT")}
    out.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    out.update(extra)
    return out


def run(
    *args: str, timeout: float = 600, python: tuple[str, ...] = (), **extra: str
) -> subprocess.CompletedProcess:
    """``python ARGS`` of this (0.9.0) venv in a subprocess (or of ``python``)."""
    return subprocess.run(
        [*(python or (sys.executable,)), *args], capture_output=True, text=True,
        env=env(**extra), timeout=timeout,
    )  # fmt: skip


def prepare_python(kind: str) -> tuple[str, ...]:
    """The Python prepare_data runs in: for a composite checkpoint, this checkout's vision venv
    (torch 2.14.1 + torchvision), where the release loads the checkpoint's AutoProcessor
    (Qwen3VLProcessor) as users' venvs do; else this venv."""
    if kind not in COMPOSITE:
        return ()
    from importlib.metadata import version

    return (str(ROOT / "tools" / "release_python.sh"), version("speculators"), "vision")


def cpu_training_env() -> dict[str, str]:
    """PYTHONPATH for a training subprocess: the test-only CPU trainer shim first."""
    return {"PYTHONPATH": cpu_trainer.subprocess_pythonpath(os.environ.get("PYTHONPATH", ""))}


@dataclass
class Stage:
    kind: str
    model: Path
    prepared: Path  # prepare_data's output; hidden_states/ inside after generation
    online: Path  # the same rows without hidden states (online training)
    server: VllmServer
    work: Path
    generation: subprocess.CompletedProcess
    images: int  # conversations about images among the data's


_running: list[VllmServer] = []


@pytest.fixture(scope="session", params=KINDS)
def stage(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    for server in _running:  # one server at a time
        server.stop()
    _running.clear()
    kind = request.param
    work = tmp_path_factory.mktemp(kind)
    model = build_target(kind, work / "model")
    rows = conversations(8)
    images = []
    if kind in COMPOSITE:
        sizes = [f"{name}={w}x{h}" for name, (w, h) in IMAGES.items()]
        program = ROOT / "tests" / "programs" / "write_images.py"
        wrote = run(str(program), str(work / "images"), *sizes, python=prepare_python(kind))
        assert wrote.returncode == 0, wrote.stderr[-3000:]
        images = image_conversations(work / "images")
    data = write_jsonl(work / "conversations.jsonl", rows + images)
    prepared = work / "prepared"
    result = run(
        "-m", "speculators_qwen_compat.prepare_data", "--model", str(model), "--data", str(data),
        "--output", str(prepared), "--seq-length", str(SEQ_LENGTH),
        "--num-preprocessing-workers", "1", python=prepare_python(kind),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    online = work / "online"
    shutil.copytree(prepared, online)
    server = vllm_server.serve_hidden_states(
        model, LAYER_IDS, work / "vllm-out", hybrid=kind in HYBRID,
        extra_args=("--allowed-local-media-path", str(work)),
    )  # fmt: skip
    _running.append(server)
    try:
        generation = run(
            "-m", "speculators", "generate-offline-data", "--endpoint", server.endpoint,
            "--preprocessed-data", str(prepared), "--concurrency", "2",
            "--validate-outputs", "--fail-on-error",
        )  # fmt: skip
        yield Stage(kind, model, prepared, online, server, work, generation, len(images))
    finally:
        server.stop()
        _running.remove(server)
