"""Shared helpers. The suite runs inside one release's venv (see the Makefile); every
prepare_data run is a subprocess of that venv's Python, the way users run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from speculators_qwen_compat import demo
from speculators_qwen_compat.demo import sample_data

RELEASE = Version(version("speculators"))
#: 0.8+ render through vLLM's /render and emit one row per assistant turn.
RENDERS = Version("0.8") <= RELEASE
STYLES = ("qwen36", "qwen35")


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECULATORS_QWEN_COMPAT")}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.update(extra)
    return env


def run_prepare(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    """``python -m speculators_qwen_compat.prepare_data ARGS`` in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "speculators_qwen_compat.prepare_data", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=subprocess_env(**env),
        timeout=900,
    )


def prepare(
    model: Path | str,
    output: Path,
    *data: Path | str,
    extra: tuple[str, ...] = (),
    workers: int = 2,
    seq_length: int = 512,
    **env: str,
) -> subprocess.CompletedProcess:
    """The usual prepare_data run: a model, one or more --data, an output folder."""
    data_args = [arg for path in data for arg in ("--data", str(path))]
    return run_prepare(
        "--model", str(model), *data_args, "--output", str(output),
        "--seq-length", str(seq_length), "--num-preprocessing-workers", str(workers), *extra,
        **env,
    )  # fmt: skip


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    """Run Python code in a fresh interpreter of this venv."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=subprocess_env(**env),
        timeout=900,
    )


def run_upstream(code: str) -> subprocess.CompletedProcess:
    """Run code against speculators exactly as installed: the venv-wide .pth switched off."""
    return run_python(code, SPECULATORS_QWEN_COMPAT="0")


@pytest.fixture(scope="session", params=STYLES)
def model_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny tokenizer with a Qwen3.6-style (thinking on) or Qwen3.5-style template (the
    Qwen3.6 one is ``qwen36_dir``: one folder per session, so runs on it can be shared)."""
    if request.param == "qwen36":
        return request.getfixturevalue("qwen36_dir")
    return demo.write_model(tmp_path_factory.mktemp(request.param), request.param)


@pytest.fixture(scope="session")
def qwen36_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo.write_model(tmp_path_factory.mktemp("qwen36"), "qwen36")


def good_rows(count: int = 24, seed: int = 3) -> list[dict[str, Any]]:
    return list(sample_data.good_conversations(count, seed=seed))


def rejected_rows() -> list[tuple[str, dict[str, Any]]]:
    return list(sample_data.rejected_conversations())


def as_written(rows: list[dict[str, Any]], sharegpt: bool) -> list[dict[str, Any]]:
    """The rows as ``write_dataset`` writes them (what the mask oracle must read)."""
    return [sample_data.to_sharegpt(r) for r in rows] if sharegpt else rows


def write_dataset(path: Path, rows: list[dict[str, Any]], sharegpt: bool = False) -> Path:
    out = [sample_data.to_sharegpt(r) if sharegpt else r for r in rows]
    return sample_data.write_jsonl(path, out)


def read_report(output: Path) -> dict[str, Any]:
    return json.loads((output / "compat_report.json").read_text(encoding="utf-8"))


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _has_torchvision() -> bool:
    try:
        import torchvision  # noqa: F401
    except Exception:
        return False
    return True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``vision`` tests (the processor path) run only where torchvision is installed (the
    vision base): deselected elsewhere, and ``-m vision`` there is an error, not a quiet pass."""
    if _has_torchvision():
        return
    if "vision" in (config.option.markexpr or ""):
        raise pytest.UsageError(
            "-m vision needs the vision base (torchvision): "
            "tools/release_python.sh RELEASE vision -P -m pytest -m vision tests/processor"
        )
    vision = [item for item in items if item.get_closest_marker("vision")]
    if vision:
        config.hook.pytest_deselected(items=vision)
        items[:] = [item for item in items if not item.get_closest_marker("vision")]


@pytest.fixture(scope="session")
def vllm_render(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``vllm_render(style) -> (model_dir, server)``: a real vLLM 0.32 render server per template
    style (tests/vllm_server.py) on a weight-less folder with the real Qwen3.6 vocabulary, started
    on first use and stopped at the end of the session, so the suite starts at most one each."""
    import vllm_server
    from qwen_vocab import vocab_dir

    servers: dict[str, tuple[Path, Any]] = {}

    def get(style: str) -> tuple[Path, Any]:
        if style not in servers:
            folder = tmp_path_factory.mktemp(f"vllm-{style}")
            model = vllm_server.model_folder(folder, demo.chat_template(style), vocab_dir())
            servers[style] = (model, vllm_server.start(model))
        return servers[style]

    yield get
    for _, server in servers.values():
        server.stop()
