"""Shared helpers. The suite runs inside one release's venv (see the Makefile); every
prepare_data run is a subprocess of that venv's Python, the way users run it. Where a module
makes several runs whose start-up is not what it tests, ``run_batch`` makes them in one such
subprocess (the entry point's ``main`` once per run): start-up and imports cost several seconds
of CPU each, the bulk of a tiny run."""

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
    args = prepare_args(model, output, *data, extra=extra, workers=workers, seq_length=seq_length)
    return run_prepare(*args, **env)


#: Runs an entry point's ``main(args)`` once per case in one interpreter; per case its exit code,
#: its stdout and stderr as file descriptors 1 and 2 saw them (logging's handlers and tracebacks
#: included), its own environment and working directory, both put back after it. A case may
#: first write or unlink files (``write``: path -> text, ``unlink``: paths) and afterwards copy
#: files the test wants to see as they were then (``copy_after``: path -> copy).
BATCH = """
import importlib, json, os, shutil, sys

cases, results = json.loads(sys.argv[1]), {}
for case in cases:
    for path, text in case.get("write", {}).items():
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    for path in case.get("unlink", []):
        os.unlink(path)
    main = importlib.import_module(case["module"]).main
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    sys.stdout.flush(); sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    for fd, path in zip((1, 2), (case["log"] + ".out", case["log"] + ".err")):
        sink = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(sink, fd)
        os.close(sink)
    try:
        if case["cwd"]:
            os.chdir(case["cwd"])
        code = main(case["args"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.stdout.flush(); sys.stderr.flush()
        for fd, old in zip((1, 2), saved):
            os.dup2(old, fd)
            os.close(old)
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    results[case["name"]] = 0 if code is None else code  # as sys.exit(main()) would exit
    for source, copy in case.get("copy_after", {}).items():
        if os.path.exists(source):
            shutil.copyfile(source, copy)
print(json.dumps(results))
"""
PREPARE_MAIN = "speculators_qwen_compat.cli.prepare_data"
PACKAGE_MAIN = "speculators_qwen_compat.__main__"  # status, doctor


def run_batch(
    logs: Path,
    cases: dict[str, list[str]],
    modules: dict[str, str] | None = None,
    cwd: dict[str, Path] | None = None,
    steps: dict[str, dict[str, Any]] | None = None,
    **env: str,
) -> dict[str, subprocess.CompletedProcess]:
    """Several entry-point runs (``main(args)`` of PREPARE_MAIN, or of ``modules[name]``) in one
    interpreter of this venv: one start-up and one import of torch, transformers and
    speculators for all of them, where each ``python -m`` run pays its own (several seconds).
    ``steps``: per case its file steps (BATCH). ``env``: the interpreter's environment on top of
    subprocess_env's. Name -> a
    CompletedProcess of that case alone."""
    logs.mkdir(parents=True, exist_ok=True)
    batch = [
        {"name": name, "args": args, "module": (modules or {}).get(name, PREPARE_MAIN),
         "log": str(logs / name), "cwd": str((cwd or {}).get(name) or ""),
         **(steps or {}).get(name, {})}
        for name, args in cases.items()
    ]  # fmt: skip
    ran = subprocess.run(
        [sys.executable, "-c", BATCH, json.dumps(batch)],
        capture_output=True, text=True, env=subprocess_env(**env), timeout=900,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    codes = json.loads(ran.stdout.strip().splitlines()[-1])
    return {
        name: subprocess.CompletedProcess(
            args, codes[name], (logs / f"{name}.out").read_text(),
            (logs / f"{name}.err").read_text(),
        )
        for name, args in cases.items()
    }  # fmt: skip


def prepare_args(
    model: Path | str,
    output: Path,
    *data: Path | str,
    extra: tuple[str, ...] = (),
    workers: int = 2,
    seq_length: int = 512,
) -> list[str]:
    """prepare_data's arguments as ``prepare`` passes them."""
    data_args = [arg for path in data for arg in ("--data", str(path))]
    return [
        "--model", str(model), *data_args, "--output", str(output),
        "--seq-length", str(seq_length), "--num-preprocessing-workers", str(workers), *extra,
    ]  # fmt: skip


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
