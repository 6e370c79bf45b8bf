"""Drafters plain speculators 0.8.1 and 0.9.0 trained for a Qwen3.5 MoE verifier (DFlash, EAGLE-3),
and the copies ``repair-drafter --config-only`` writes, served by vLLM 0.32 (``vllm.LLM``, CPU;
tests/programs/vllm_serve_drafter.py): a DFlash folder as saved is refused for its M-RoPE keys;
every copy loads and drafts, as does a folder our train saved (its record beside it). Norm
verdicts: tests/test_fine_tune_drafter.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import drafters
import pytest
import tiny_checkpoints as tiny
import vllm_server
from conftest import FIXES_OFF, PROGRAMS, release_command, subprocess_env

from speculators_qwen_compat.training import drafter_record

pytestmark = pytest.mark.vllm

BLOCK = "8"


def _serve(root: Path, verifier: Path, drafter: Path, method: str) -> tuple[dict, str]:
    """(the program's answer, its output: the engine process logs its root cause there)."""
    env = vllm_server.vllm_env(root / "vllm-scratch", torchvision=True)
    result = subprocess.run(
        [str(vllm_server.VLLM_PYTHON), str(PROGRAMS / "vllm_serve_drafter.py"), str(verifier),
         str(drafter), method, str(int(BLOCK) - 1 if method == "dflash" else 2)],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    lines = [x for x in result.stdout.splitlines() if x.startswith("SERVED ")]
    assert lines, (result.stdout + result.stderr)[-4000:]
    return json.loads(lines[-1][len("SERVED ") :]), result.stdout + result.stderr


#: (release, drafter type) trained by plain speculators, as users have them.
CASES = (("0.8.1", "dflash"), ("0.9.0", "dflash"), ("0.8.1", "eagle3"))
FLAGS = {"dflash": ("--block-size", BLOCK, "--max-anchors", "16"), "eagle3": ("--ttt-steps", "2")}


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The verifier, and per case the epoch folder upstream saved and its repaired copy."""
    from cpu_trainer import subprocess_pythonpath

    root = tmp_path_factory.mktemp("repair-served")
    verifier = tiny.write_checkpoint(
        root / "qwen35_moe", "qwen35_moe", sizes=tiny.VLLM, bf16=True, processor=True
    )
    data = drafters.offline_data(root / "prepared", tiny.VLLM.hidden)
    cases = {}
    for release, kind in CASES:
        save = root / f"{kind}-{release}"
        command, env = release_command(
            release, "-m", "speculators.train", "--speculator-type", kind,
            "--verifier-name-or-path", str(verifier), "--data-path", str(data),
            "--save-path", str(save), "--target-layer-ids", *drafters.TARGET_LAYERS,
            "--num-layers", "1", "--total-seq-len", "128", "--mask-token-id", "1210",
            "--loss-implementation", "eager", "--draft-attn-impl", "sdpa", "--num-workers", "0",
            "--epochs", "1", "--no-resume-from-checkpoint", "--optimizer", "adamw",
            "--hidden-states-dtype", "float32", *FLAGS[kind], OMP_NUM_THREADS="1", **FIXES_OFF,
        )  # fmt: skip
        env["PYTHONPATH"] = subprocess_pythonpath(env["PYTHONPATH"])
        result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
        assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
        copy = root / f"{kind}-{release}-served"
        result = subprocess.run(
            [sys.executable, "-m", "speculators_qwen_compat", "repair-drafter", str(save / "0"),
             "--output", str(copy), "--model", str(verifier), "--config-only"],
            capture_output=True, text=True, env=subprocess_env(), timeout=300,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        cases[(release, kind)] = (save / "0", copy)
    tuned = root / "dflash-finetuned"
    command, env = release_command(
        "0.9.0", "-m", "speculators_qwen_compat.train", "--speculator-type", "dflash",
        "--verifier-name-or-path", str(verifier), "--from-pretrained",
        str(cases[("0.9.0", "dflash")][0]), "--data-path", str(data), "--save-path", str(tuned),
        "--target-layer-ids", *drafters.TARGET_LAYERS, "--total-seq-len", "128",
        "--mask-token-id", "1210", "--loss-implementation", "eager", "--draft-attn-impl", "sdpa",
        "--num-workers", "0", "--epochs", "1", "--no-resume-from-checkpoint", "--optimizer",
        "adamw", "--hidden-states-dtype", "float32", OMP_NUM_THREADS="1",
    )  # fmt: skip
    env["PYTHONPATH"] = subprocess_pythonpath(env["PYTHONPATH"])
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    return {"root": root, "verifier": verifier, "cases": cases, "tuned": tuned / "0"}


def test_vllm_refuses_the_folder_as_saved(folders: dict) -> None:
    """The pin of what repair-drafter is for: retire it when vLLM serves M-RoPE drafters."""
    saved, _ = folders["cases"][("0.9.0", "dflash")]
    answer, log = _serve(folders["root"], folders["verifier"], saved, "dflash")
    assert "refused" in answer, answer
    assert "does not support M-RoPE yet" in log, log[-3000:]


@pytest.mark.parametrize("case", CASES, ids=["-".join(c) for c in CASES])
def test_vllm_serves_the_repaired_copy(folders: dict, case: tuple[str, str]) -> None:
    _, copy = folders["cases"][case]
    answer, log = _serve(folders["root"], folders["verifier"], copy, case[1])
    assert "refused" not in answer, log[-3000:]
    assert answer["num_drafts"] > 0 and answer["num_draft_tokens"] > 0, answer
    print(f"{case}: {answer}")


def test_vllm_serves_what_our_train_saved(folders: dict) -> None:
    """The 0.9.0 folder fine-tuned with the fixes on, as saved (its record beside config.json):
    vLLM loads it without a repair and drafts."""
    assert drafter_record.read(folders["tuned"])["weights"]["trained_steps"] > 0
    answer, log = _serve(folders["root"], folders["verifier"], folders["tuned"], "dflash")
    assert "refused" not in answer, log[-3000:]
    assert answer["num_drafts"] > 0, answer
