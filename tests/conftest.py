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
from speculators_qwen_compat.cli.prepare_data import REPORT_NAME
from speculators_qwen_compat.core.startup import ENV_SWITCH
from speculators_qwen_compat.demo import sample_data

RELEASE = Version(version("speculators"))
#: 0.8+ render through vLLM's /render and emit one row per assistant turn.
RENDERS = Version("0.8") <= RELEASE
STYLES = ("qwen36", "qwen35")
PROGRAMS = Path(__file__).resolve().with_name("programs")
ROOT = PROGRAMS.parents[1]
#: The environment of a process that sees upstream as installed: the venv-wide .pth stays idle.
FIXES_OFF = {ENV_SWITCH: "0"}


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_SWITCH)}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.update(extra)
    return env


def run_options_env(**options: Any) -> dict[str, str]:
    """The one variable a run hands its child processes (core/run_options.py), holding
    ``options`` (the rest at their defaults)."""
    from speculators_qwen_compat.core.run_options import RUN_ENV, RunOptions

    return {RUN_ENV: RunOptions(**options).to_json()}


def release_command(release: str, *args: str, **env: str) -> tuple[list[str], dict[str, str]]:
    """(command, environment) running ``python ARGS`` on speculators ``release``
    (tools/release_python.sh), whatever release runs pytest."""
    environment = subprocess_env(**env)
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    environment["PYTHONPATH"] = os.pathsep.join(
        p
        for p in paths
        if p and Path(p).parent.parent.name != "rel"  # not this run's release
    )
    return [str(ROOT / "tools" / "release_python.sh"), release, *args], environment


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
    Each case starts from the package's state as a fresh interpreter has it (programs/
    batch_main.py says how). ``steps``: per case its file steps (``write``, ``unlink``,
    ``copy_after``; batch_main.py). ``env``: the interpreter's environment on top of
    subprocess_env's. Name -> a CompletedProcess of that case alone."""
    logs.mkdir(parents=True, exist_ok=True)
    batch = [
        {"name": name, "args": args, "module": (modules or {}).get(name, PREPARE_MAIN),
         "log": str(logs / name), "cwd": str((cwd or {}).get(name) or ""),
         **(steps or {}).get(name, {})}
        for name, args in cases.items()
    ]  # fmt: skip
    listed = logs / "cases.json"
    listed.write_text(json.dumps(batch), encoding="utf-8")
    ran = run_program("batch_main", str(listed), **env)
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


def program(name: str) -> Path:
    """``tests/programs/NAME.py``: a program the tests run in an interpreter of its own."""
    return PROGRAMS / f"{name}.py"


def run_program(
    name: str,
    *args: str,
    flags: tuple[str, ...] = (),
    cwd: Path | None = None,
    new_session: bool = False,
    **env: str,
) -> subprocess.CompletedProcess:
    """``python FLAGS tests/programs/NAME.py ARGS`` in a fresh interpreter of this venv, with
    subprocess_env's environment plus ``env`` (``new_session``: leading a process group of its
    own, which it may kill whole)."""
    return subprocess.run(
        [sys.executable, *flags, str(program(name)), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=subprocess_env(**env),
        timeout=900,
        start_new_session=new_session,
    )


@pytest.fixture(scope="session", params=STYLES)
def model_dir(request: pytest.FixtureRequest) -> Path:
    """The tiny tokenizer with a Qwen3.6-style (thinking on) or Qwen3.5-style template: the
    session's ``qwen36_dir`` or ``qwen35_dir`` (one folder per style, so runs can be shared)."""
    return request.getfixturevalue(f"{request.param}_dir")


@pytest.fixture(scope="session")
def qwen36_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo.write_model(tmp_path_factory.mktemp("qwen36"), "qwen36")


@pytest.fixture(scope="session")
def qwen35_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo.write_model(tmp_path_factory.mktemp("qwen35"), "qwen35")


@pytest.fixture(scope="session")
def pins(qwen36_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every probe of programs/upstream_pins.py in one interpreter of the release as installed
    (fixes off): probe name -> its answer (test_upstream_pins.py, test_data_order.py)."""
    import json

    work = tmp_path_factory.mktemp("pins")
    result = run_program("upstream_pins", str(qwen36_dir), str(work), **FIXES_OFF)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


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
    return json.loads((output / REPORT_NAME).read_text(encoding="utf-8"))


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
