"""A drafter trained by plain speculators (0.8.1, 0.9.0) before the fixes, as a user has it:
doctor's verdict, the epochs' parent, repair-drafter, re-saving, and fine-tuning it with
``python -m speculators_qwen_compat.train --from-pretrained FOLDER`` (the README's flags).

Upstream trains it with the switch off (``python -m speculators.train``, as shipped) on a tiny
MoE Qwen3.5 verifier whose DFlash verifier_norm every release builds ``x*w``
(tests/test_norm_verdict.py checks that table against each release's own classes). Hidden states
are random: these runs check what is saved and said, not what is learned.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import drafters
import pytest
import tiny_checkpoints as tiny
from conftest import FIXES_OFF, RELEASE, run_program, subprocess_env
from packaging.version import Version

from speculators_qwen_compat.training import drafter_record

pytestmark = pytest.mark.skipif(Version("0.8") > RELEASE, reason="speculators.train is 0.8+'s")

MASK_TOKEN = "1210"
#: What a CPU run needs beside the README's flags (tests/cpu_trainer.py).
CPU = (
    "--mask-token-id", MASK_TOKEN, "--loss-implementation", "eager", "--draft-attn-impl", "sdpa",
    "--num-workers", "0", "--epochs", "1", "--no-resume-from-checkpoint", "--optimizer", "adamw",
    "--hidden-states-dtype", "float32",
)  # fmt: skip


def _train(module: str, verifier: Path, data: Path, save: Path, *flags: str,
           **env: str) -> subprocess.CompletedProcess:  # fmt: skip
    from cpu_trainer import subprocess_pythonpath

    command = [
        sys.executable, "-m", module, "--verifier-name-or-path", str(verifier),
        "--data-path", str(data), "--save-path", str(save),
        "--target-layer-ids", *drafters.TARGET_LAYERS, "--total-seq-len", "128", *flags, *CPU,
    ]  # fmt: skip
    environment = subprocess_env(
        COLUMNS="400", OMP_NUM_THREADS="1",
        PYTHONPATH=subprocess_pythonpath(os.environ.get("PYTHONPATH", "")), **env,
    )  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, env=environment, timeout=600)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "speculators_qwen_compat", *args],
        capture_output=True, text=True, env=subprocess_env(), timeout=300,
    )  # fmt: skip


def _doctor(verifier: Path, drafter: Path) -> subprocess.CompletedProcess:
    return _cli("doctor", "--model", str(verifier), "--drafter", str(drafter))


def _norm_line(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in result.stdout.splitlines() if line.startswith("verifier norm:")]
    assert len(lines) == 1, result.stdout + result.stderr
    return lines[0]


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir()) if p.is_file()}  # fmt: skip


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The verifier, the data, upstream's run (fixes off) and our fine-tune of its epoch 0."""
    root = tmp_path_factory.mktemp("fine-tune")
    verifier = tiny.write_checkpoint(root / "qwen35_moe", "qwen35_moe")
    data = drafters.offline_data(root / "prepared", tiny.HIDDEN)
    upstream = root / "out" / "dflash"
    dflash = ("--speculator-type", "dflash")
    result = _train("speculators.train", verifier, data, upstream, *dflash, "--num-layers", "1",
                    "--block-size", "8", "--max-anchors", "16", **FIXES_OFF)  # fmt: skip
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    tuned = root / "out" / "dflash-finetuned"
    source = upstream / "0"
    before = _digest(source)
    result = _train("speculators_qwen_compat.train", verifier, data, tuned, *dflash,
                    "--from-pretrained", str(source))  # fmt: skip
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert _digest(source) == before  # fine-tuning never writes its source
    log = result.stdout + result.stderr
    return {"root": root, "verifier": verifier, "data": data, "upstream": upstream,
            "source": source, "tuned": tuned / "0", "tune_log": log}  # fmt: skip


def test_upstream_folder_is_mis_scaled(trained: dict) -> None:
    """No record, so the folder's release, class and verifier family decide: 0.8.1/0.9.0
    DFlash for a qwen3_5_moe verifier computed x*w. Exit 1, and the fine-tune command named."""
    assert not (trained["source"] / drafter_record.RECORD_FILE).exists()
    result = _doctor(trained["verifier"], trained["source"])
    assert result.returncode == 1
    line = _norm_line(result)
    assert line.startswith("verifier norm: mis-scaled: "), line
    assert f"speculators {RELEASE} dflash builds verifier_norm as x/rms(x)*w" in line
    error = result.stderr.strip().splitlines()[-1]
    assert "verifier norm mis-scaled" in error
    assert f"--from-pretrained {trained['source']}" in error
    assert "python -m speculators_qwen_compat.train --speculator-type dflash" in error


def test_epochs_parent_names_its_epochs(trained: dict) -> None:
    result = _doctor(trained["verifier"], trained["upstream"])
    assert result.returncode == 1
    error = result.stderr.strip().splitlines()
    assert len(error) == 1, result.stderr
    assert "no config.json; it holds the epoch folders 0/" in error[0]
    assert "checkpoint_best/" in error[0]
    assert f"--drafter {trained['upstream'] / 'checkpoint_best'}" in error[0]


def test_fine_tune_rights_the_norm_not_the_verdict(trained: dict) -> None:
    """The README's train flags plus --from-pretrained: it trains (float32, the fix says so),
    the record says how many steps, from what, with which norm; doctor says unknown (what the
    steps undid is not measured), exit 0."""
    log = " ".join(trained["tune_log"].split())
    assert "fix fine_tune_dtype" in log
    assert "upstream_norms.py is out of date" not in log  # the table is this release's
    record = drafter_record.read(trained["tuned"])
    assert record is not None
    assert record["weights"]["kind"] == drafter_record.LOADED
    assert record["weights"]["trained_steps"] > 0
    assert record["weights"]["source"] == str(trained["source"])
    assert record["weights"]["source_verdict"]["word"] == "mis-scaled"
    assert record["verifier_norm"] == record["verifier_convention"] == "x/rms(x)*(1+w)"
    assert record["upstream_builds"] == "x/rms(x)*w"
    assert set(record["fixes"]) >= {"verifier_norm", "served_rope"}
    result = _doctor(trained["verifier"], trained["tuned"])
    assert result.returncode == 0, result.stdout + result.stderr
    line = _norm_line(result)
    steps = record["weights"]["trained_steps"]
    assert line.startswith(
        f"verifier norm: unknown: fine-tuned {steps} steps from a drafter that learned "
        "mis-scaled targets: its norm is right now; "
    ), line
    assert str(trained["source"]) in line
    assert (
        _digest(trained["tuned"])["model.safetensors"]
        != _digest(trained["source"])["model.safetensors"]
    )


def test_pin_fine_tune_in_saved_dtype_fails(trained: dict, tmp_path: Path) -> None:
    """Without fine_tune_dtype, upstream loads the bf16 folder as bf16 and the first step meets
    float32 hidden states. The fix can retire when this passes without it."""
    off = {"SPECULATORS_QWEN_COMPAT": "off:fine_tune_dtype"}
    result = _train("speculators_qwen_compat.train", trained["verifier"], trained["data"],
                    tmp_path / "t", "--speculator-type", "dflash", "--from-pretrained",
                    str(trained["source"]), **off)  # fmt: skip
    assert result.returncode != 0
    assert "same dtype" in result.stderr, result.stderr[-2000:]


def test_resaving_never_claims_the_weights_fixed(trained: dict, tmp_path: Path) -> None:
    """Loading and saving with the fixes on (no training): the norm in memory is replaced, but
    the record and doctor keep the source's verdict, and the log says to retrain."""
    target = tmp_path / "resaved"
    result = run_program("resave_drafter", str(trained["source"]), str(target))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "replaced by an x*(1+w) RMS norm" in result.stderr
    assert "its weights are mis-scaled" in result.stderr
    assert "retrain with the fixes on" in result.stderr
    assert drafter_record.read(target)["weights"]["trained_steps"] == 0
    doctor = _doctor(trained["verifier"], target)
    assert doctor.returncode == 1
    assert _norm_line(doctor).startswith("verifier norm: mis-scaled: re-saved by speculators")


def test_repair_refuses_a_mis_scaled_drafter(trained: dict, tmp_path: Path) -> None:
    source, target = trained["source"], tmp_path / "served"
    before = _digest(source)
    result = _cli("repair-drafter", str(source), "--output", str(target))
    assert result.returncode == 1 and not target.exists()
    error = result.stderr.strip().splitlines()
    assert len(error) == 1, result.stderr
    assert "verifier norm mis-scaled" in error[0] and "--config-only" in error[0]
    assert "--from-pretrained" in error[0]

    result = _cli("repair-drafter", str(source), "--output", str(target), "--config-only")
    assert result.returncode == 0, result.stderr
    assert _digest(source) == before  # SRC never written
    config = json.loads((target / "config.json").read_text())
    rope = config["transformer_layer_config"]["rope_parameters"]
    assert "mrope_section" not in rope
    assert _digest(target)["model.safetensors"] == before["model.safetensors"]
    assert "vllm serve " in result.stdout and str(target) in result.stdout
    doctor = _doctor(trained["verifier"], target)
    assert doctor.returncode == 1  # still mis-scaled; the config is served as trained
    assert _norm_line(doctor).startswith("verifier norm: mis-scaled: ")
    assert "rope:" in doctor.stdout and "plain RoPE" in doctor.stdout
    assert "mrope_section" not in doctor.stderr

    again = _cli("repair-drafter", str(source), "--output", str(target), "--config-only")
    assert again.returncode == 1 and "exists" in again.stderr


def test_repair_of_a_fine_tuned_drafter(trained: dict, tmp_path: Path) -> None:
    """What our train saved (fine-tuned, fixes on; verdict unknown, not refused) already serves
    as trained: a copy, nothing changed, record kept, exit 0."""
    target = tmp_path / "copy"
    result = _cli("repair-drafter", str(trained["tuned"]), "--output", str(target))
    assert result.returncode == 0, result.stderr
    assert "nothing: vLLM already serves it as it trained" in result.stdout
    assert _digest(target) == _digest(trained["tuned"])


def test_stale_record_is_ignored(trained: dict, tmp_path: Path) -> None:
    """A later save into the folder that wrote no record (here: the source's weights copied over
    the fine-tuned ones): the record no longer describes them; doctor says so and judges the
    folder by its release, as plain speculators saved it."""
    target = tmp_path / "stale"
    shutil.copytree(trained["tuned"], target)
    shutil.copyfile(trained["source"] / "model.safetensors", target / "model.safetensors")
    assert drafter_record.read(target) is None
    result = _doctor(trained["verifier"], target)
    assert "ignored: " in result.stdout and "other weights" in result.stdout, result.stdout
    assert _norm_line(result).startswith("verifier norm: mis-scaled: speculators ")
    assert result.returncode == 1
