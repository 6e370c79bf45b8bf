"""A DFlash drafter plain speculators trained for a Qwen3.5 MoE verifier, and the copy
``repair-drafter --config-only`` writes, each served by vLLM 0.32 (``vllm.LLM``, CPU): the folder as
saved is refused for its M-RoPE keys; the copy loads and drafts, with the weights unchanged
(tests/programs/vllm_serve_drafter.py). Its norm verdict is checked in
tests/test_fine_tune_drafter.py; here only what vLLM does with the folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import drafters
import pytest
import tiny_checkpoints as tiny
import vllm_server
from conftest import FIXES_OFF, PROGRAMS, subprocess_env

pytestmark = pytest.mark.vllm

BLOCK = "8"


def _serve(root: Path, verifier: Path, drafter: Path) -> tuple[dict, str]:
    """(the program's answer, its output: the engine process logs its root cause there)."""
    env = vllm_server.vllm_env(root / "vllm-scratch", torchvision=True)
    result = subprocess.run(
        [str(vllm_server.VLLM_PYTHON), str(PROGRAMS / "vllm_serve_drafter.py"), str(verifier),
         str(drafter), "dflash", str(int(BLOCK) - 1)],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    lines = [x for x in result.stdout.splitlines() if x.startswith("SERVED ")]
    assert lines, (result.stdout + result.stderr)[-4000:]
    return json.loads(lines[-1][len("SERVED ") :]), result.stdout + result.stderr


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from cpu_trainer import subprocess_pythonpath

    root = tmp_path_factory.mktemp("repair-served")
    verifier = tiny.write_checkpoint(
        root / "qwen35_moe", "qwen35_moe", sizes=tiny.VLLM, bf16=True, processor=True
    )
    data = drafters.offline_data(root / "prepared", tiny.VLLM.hidden)
    save = root / "out"
    command = [
        sys.executable, "-m", "speculators.train", "--speculator-type", "dflash",
        "--verifier-name-or-path", str(verifier), "--data-path", str(data),
        "--save-path", str(save), "--target-layer-ids", *drafters.TARGET_LAYERS,
        "--num-layers", "1", "--block-size", BLOCK, "--max-anchors", "16",
        "--total-seq-len", "128", "--mask-token-id", "1210", "--loss-implementation", "eager",
        "--draft-attn-impl", "sdpa", "--num-workers", "0", "--epochs", "1",
        "--no-resume-from-checkpoint", "--optimizer", "adamw", "--hidden-states-dtype", "float32",
    ]  # fmt: skip
    env = subprocess_env(
        OMP_NUM_THREADS="1",
        PYTHONPATH=subprocess_pythonpath(os.environ.get("PYTHONPATH", "")),
        **FIXES_OFF,
    )
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    copy = root / "served"
    result = subprocess.run(
        [sys.executable, "-m", "speculators_qwen_compat", "repair-drafter", str(save / "0"),
         "--output", str(copy), "--model", str(verifier), "--config-only"],
        capture_output=True, text=True, env=subprocess_env(), timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return {"root": root, "verifier": verifier, "saved": save / "0", "copy": copy}


def test_vllm_refuses_the_folder_as_saved(folders: dict) -> None:
    """The pin of what repair-drafter is for: retire it when vLLM serves M-RoPE drafters."""
    answer, log = _serve(folders["root"], folders["verifier"], folders["saved"])
    assert "refused" in answer, answer
    assert "does not support M-RoPE yet" in log, log[-3000:]


def test_vllm_serves_the_repaired_copy(folders: dict) -> None:
    answer, log = _serve(folders["root"], folders["verifier"], folders["copy"])
    assert "refused" not in answer, log[-3000:]
    assert answer["num_drafts"] > 0 and answer["num_draft_tokens"] > 0, answer
