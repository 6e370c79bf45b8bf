"""Drop-in: the wheel's .pth reaches upstream's own commands, users' scripts, datasets.map
workers under fork and spawn, torchrun ranks and their children; nothing heavy at start-up;
installing the wheel changes nothing else in a venv."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import (
    FIXES_OFF,
    RENDERS,
    good_rows,
    program,
    rejected_rows,
    run_program,
    subprocess_env,
    write_dataset,
)

from speculators_qwen_compat.cli.train import REPO_ENV

ROOT = Path(__file__).resolve().parents[1]


def console_script(name: str) -> str:
    """A console script as the user's shell finds it (the release's own, e.g. ``speculators``)."""
    found = shutil.which(name)
    assert found, f"{name} is not on PATH"
    return found


def _run(args: list[str], cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        args, capture_output=True, text=True, cwd=cwd, env=subprocess_env(**env), timeout=900
    )


def _mixed_data(tmp_path: Path) -> tuple[Path, int]:
    good = good_rows(12)
    data = write_dataset(tmp_path / "d.jsonl", good + [row for _, row in rejected_rows()])
    return data, len(good)


def test_startup_imports_nothing_heavy() -> None:
    result = run_program("heavy_imports")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout) == [True, []]


# spawn once, on the newest release: a spawned map worker is a fresh interpreter, which the
# .pth reaches the same way whichever release is installed (fork: per release, below)
@pytest.mark.parametrize("method", ["fork", pytest.param("spawn", marks=pytest.mark.pure)])
def test_users_script_and_map_workers(qwen36_dir: Path, tmp_path: Path, method: str) -> None:
    """A script shaped like upstream's git-only scripts/prepare_data.py: top-level import of
    load_and_preprocess_dataset, run as __main__, nothing of ours imported. (Upstream alone
    reads no rows from this OpenAI-format data and dies:
    test_upstream_pins.py::test_openai_messages_give_no_rows pins that per release.)"""
    data, _ = _mixed_data(tmp_path)
    script = program("user_prepare_script")
    args = [sys.executable, str(script), method, str(qwen36_dir), str(data), str(tmp_path)]
    fixed = _run(args)
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert int(fixed.stdout.split("ROWS")[1].split()[0]) > 0
    assert "skipped 4 of 16 conversations" in fixed.stderr


def test_upstream_cli(qwen36_dir: Path, tmp_path: Path) -> None:
    """Upstream's own console script with the venv's .pth: OpenAI-format data, which upstream
    alone turns into "No samples remain" (test_upstream_pins.py::test_openai_messages_give_no_rows
    pins that per release), is read and written."""
    data = write_dataset(tmp_path / "openai.jsonl", good_rows(8))
    args = [console_script("speculators"), "prepare-data", "--model", str(qwen36_dir), "--data",
            str(data), "--output", str(tmp_path / "out"), "--seq-length", "512",
            "--num-preprocessing-workers", "2", "--render-endpoint", "local"]  # fmt: skip
    if not RENDERS:  # <= 0.7: the wheel has no prepare-data command at all
        import importlib.util

        assert importlib.util.find_spec("speculators.cli") is None
        return
    fixed = _run(args)
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert (tmp_path / "out" / "dataset_info.json").exists()
    assert "skipped 0 of 8 conversations" in fixed.stderr


# once, on the newest release: the .pth and the environment reach ranks and their children
# the same way whichever release is installed (each release's fixes: test_activation.py)
@pytest.mark.pure
def test_torchrun_ranks_and_their_children() -> None:
    probe = program("rank_probe")
    torchrun = [console_script("torchrun"), "--standalone", "--nproc_per_node=2"]
    for env, entry in (({}, [str(probe)]),
                       (FIXES_OFF,
                        ["-m", "speculators_qwen_compat.run", str(probe)])):  # fmt: skip
        result = _run([*torchrun, *entry], **env)
        assert result.returncode == 0, result.stderr[-3000:]
        lines = sorted(line for line in result.stdout.splitlines() if line.startswith("RANK"))
        assert lines == ["RANK 0 patched=True child=True", "RANK 1 patched=True child=True"]


def test_train_entry_point_reaches_the_trainer() -> None:
    result = _run([sys.executable, "-m", "speculators_qwen_compat.train", "--help"])
    if RENDERS:  # 0.8+ ship the trainer (under torchrun: test_training_fixes.py, 0.9)
        assert result.returncode == 0, result.stderr[-3000:]
        assert "--verifier-name-or-path" in result.stdout and "--dry-run" in result.stdout
    else:
        assert result.returncode == 1
        assert "ships no trainer in its wheel" in result.stderr.splitlines()[-1]


# once, on the newest release: finding the script is our code alone, whichever release is there
@pytest.mark.pure
def test_train_entry_point_runs_a_named_script(tmp_path: Path) -> None:
    """<= 0.7 users name the checkout's script; any script gets the fixes the same way."""
    script = tmp_path / "scripts" / "train.py"  # where SPECULATORS_REPO's script is looked up
    script.parent.mkdir()
    shutil.copyfile(program("train_script"), script)
    for args, env in ((["--script", str(script), "--lr", "1"], {}),
                      (["--lr", "1"], {REPO_ENV: str(tmp_path)})):  # fmt: skip
        ran = _run([sys.executable, "-m", "speculators_qwen_compat.train", *args],
                   **FIXES_OFF, **env)  # fmt: skip
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert "ARGS ['--lr', '1'] True" in ran.stdout


@pytest.mark.pure  # a script and a module of the standard library: no release involved
def test_run_entry_point() -> None:
    script = program("run_target")
    result = _run([sys.executable, "-m", "speculators_qwen_compat.run", str(script), "a", "-b"],
                  **FIXES_OFF)  # fmt: skip
    assert result.stdout.strip() == f"[{str(script)!r}, 'a', '-b'] True"
    module = _run([sys.executable, "-m", "speculators_qwen_compat.run", "-m", "json.tool",
                   "--help"])  # fmt: skip
    assert module.returncode == 0 and "json.tool" in module.stdout


@pytest.mark.pure
def test_installing_the_wheel_changes_nothing_else(tmp_path: Path) -> None:
    """A fresh venv holding a speculators release: pip freeze before and after installing our
    wheel differs only by additions: this package and its own small dependencies. Run once
    (``pure``, on the newest release): speculators is no dependency of the wheel, so pip
    resolves the same two requirements (wrapt, packaging) whichever release is beside them."""
    wheels = sorted((ROOT / "build" / "wheel").glob("speculators_qwen_compat-*.whl"))
    assert wheels, "build the wheel first (make test does)"
    from importlib.metadata import version

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--no-deps", f"speculators=={version('speculators')}",
                    "packaging", "typer"], check=True)  # fmt: skip

    def freeze() -> set[str]:
        out = subprocess.run([*pip, "freeze"], capture_output=True, text=True, check=True)
        return set(out.stdout.splitlines())

    before = freeze()
    subprocess.run([*pip, "install", str(wheels[-1])], check=True)
    after = freeze()
    assert before <= after, f"changed or removed: {sorted(before - after)}"
    added = {re.split(r"==| @ ", line)[0].lower() for line in after - before}
    assert added == {"speculators-qwen-compat", "wrapt"}


def test_a_fix_is_imported_when_a_module_it_targets_is() -> None:
    """The catalogue holds each fix as "module:Class": install() imports none of them; once
    upstream's preprocessing module is imported, a fix's class is imported exactly when one
    of the modules it names is (so a release's training fixes wait for its trainer)."""
    result = run_program("fix_imports")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["at_install"] == []
    assert report["after"]["row_guard"]["target_imported"]  # preprocessing itself
    for name, seen in report["after"].items():
        assert seen["class_imported"] == seen["target_imported"], name
