"""The pipeline tier's shared stages, one target model at a time (``make test-pipeline``).

For each model kind (tests/pipeline/models.py) the session fixture ``stage`` builds the
checkpoint and runs the README's own steps on it (tests/pipeline/readme_path.py: the README's
commands with the tier's model, data, sizes and server swapped in): ``prepare`` on the
tool-call/reasoning data and, for a composite checkpoint, conversations about generated PNGs (on
the vision venv, through its AutoProcessor); ``serve-target``, one real vLLM with hidden-state
extraction (reading the images: ``--allowed-local-media-path``, as the README says for image
data); ``generate``, upstream's ``speculators generate-offline-data --validate-outputs``.
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

from . import readme_path
from .data import IMAGES, conversations, image_conversations, in_blocks, write_jsonl
from .models import COMPOSITE, KINDS, NUM_LAYERS, build_target

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


#: The README's sizes, as the tier runs them (readme_path's table).
SIZES = {
    "--seq-length": str(SEQ_LENGTH), "--total-seq-len": str(SEQ_LENGTH),
    "--max-model-len": "512", "--concurrency": "2",
    "--max-tokens": "64",
}  # fmt: skip


def swap_for(model: Path, work: Path, data: Path, url: str = readme_path.USER_URL):
    """The tier's values for the README's (tests/pipeline/readme_path.py)."""
    return readme_path.Swap(
        model=model, work=work, url=url, storage=work / "vllm-out", aux_layers=AUX_LAYERS,
        layers=LAYER_IDS, sizes=SIZES, paths={"chats.jsonl": data},
    )  # fmt: skip


#: Runs a console script found on the PATH tools/release_python.sh sets (its venv's bin first).
EXEC = "import os, sys; os.execvp(sys.argv[1], sys.argv[1:])"


def execute(
    tokens: list[str], cwd: Path, python: tuple[str, ...] = (), timeout: float = 600, **extra: str
) -> subprocess.CompletedProcess:
    """One README command as its user's shell runs it, from ``cwd``: ``python`` is this venv's
    and a console script the one on PATH (tools/release_python.sh puts this checkout's venv and
    the release's scripts there); with ``python`` (prepare_python's vision venv), both are that
    venv's."""
    program, *args = tokens
    if program == "python":
        head = list(python or (sys.executable,))
    elif python:
        head = [*python, "-c", EXEC, program]
    else:
        found = shutil.which(program)
        assert found, f"{program} is not on PATH"
        head = [found]
    return subprocess.run(
        [*head, *args], capture_output=True, text=True, env=env(**extra), timeout=timeout,
        cwd=cwd,
    )  # fmt: skip


def prepare_python(kind: str) -> tuple[str, ...]:
    """The Python prepare_data (and doctor on the same data) runs in: for a composite checkpoint,
    this checkout's vision venv (torch 2.14.1 + torchvision, Pillow), where the release loads the
    checkpoint's AutoProcessor (Qwen3VLProcessor) and reads the images, as the README's install
    step asks of users' venvs; else this venv."""
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
    data: Path  # the README's chats.jsonl


_running: list[VllmServer] = []


@pytest.fixture(scope="session", params=KINDS)
def stage(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    for server in _running:  # one server at a time
        server.stop()
    _running.clear()
    kind = request.param
    work = tmp_path_factory.mktemp(kind)
    model = build_target(kind, work / "model")
    rows = in_blocks(conversations(8))  # then the images: kinds in blocks, as corpora come
    images = []
    if kind in COMPOSITE:
        sizes = [f"{name}={w}x{h}" for name, (w, h) in IMAGES.items()]
        program = ROOT / "tests" / "programs" / "write_images.py"
        wrote = run(str(program), str(work / "images"), *sizes, python=prepare_python(kind))
        assert wrote.returncode == 0, wrote.stderr[-3000:]
        images = image_conversations(work / "images")
    data = write_jsonl(work / "conversations.jsonl", rows + images)
    swap = swap_for(model, work, data)
    (prepare,) = readme_path.command("prepare", swap)
    result = execute(prepare, work, python=prepare_python(kind))
    assert result.returncode == 0, result.stderr[-3000:]
    prepared = work / "prepared"  # the README's --output
    online = work / "online"
    shutil.copytree(prepared, online)
    (serve,) = readme_path.command("serve-target", swap)
    # the README's note for image data: the folder holding the images
    serve = [*readme_path.with_cpu(serve), "--allowed-local-media-path", str(work)]
    server = vllm_server.serve(serve)
    _running.append(server)
    try:
        (generate,) = readme_path.command("generate", swap_for(model, work, data, server.url))
        generation = execute(generate, work)
        yield Stage(kind, model, prepared, online, server, work, generation, len(images), data)
    finally:
        server.stop()
        _running.remove(server)
