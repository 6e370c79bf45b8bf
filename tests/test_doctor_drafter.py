"""``doctor --drafter DIR --model VERIFIER`` on drafters the release's own code saved (0.8+).

Run as users run it (a subprocess of the entry point). Whether its verdicts are vLLM's own is
checked in tests/test_served_drafter.py (vLLM's config reader on the same kind of folders).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import drafters
import pytest
import tiny_checkpoints as tiny
from conftest import FIXES_OFF, RELEASE, subprocess_env
from packaging.version import Version

pytestmark = pytest.mark.skipif(Version("0.8") > RELEASE, reason="built through 0.8+'s CLI")


@pytest.fixture(scope="module")
def verifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny.write_checkpoint(tmp_path_factory.mktemp("verifier") / "qwen35_moe", "qwen35_moe")


def _save(verifier: Path, folder: Path, kind: str, *flags: str, **env: str) -> Path:
    program = (
        "import sys; sys.path.insert(0, 'tests'); from pathlib import Path; import drafters; "
        f"drafters.build_drafter(Path({str(verifier)!r}), {kind!r}, Path({str(folder)!r}) / 'run', "
        f"*{list(flags)!r}).save_pretrained({str(folder)!r})"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True,
        env=subprocess_env(**env), cwd=Path(drafters.__file__).parents[1], timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return folder


def _doctor(verifier: Path, drafter: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "speculators_qwen_compat", "doctor", "--model", str(verifier),
         "--drafter", str(drafter)],
        capture_output=True, text=True, env=subprocess_env(), timeout=300,
    )  # fmt: skip


def _serve_words(stdout: str) -> list[str]:
    """The serve line as the shell splits it."""
    return shlex.split(stdout.split("serve it:\n", 1)[1].strip().splitlines()[0])


def _serve_config(stdout: str) -> dict:
    words = _serve_words(stdout)
    return json.loads(words[words.index("--speculative-config") + 1])


def test_saved_with_fixes_serves_as_trained(verifier: Path, tmp_path: Path) -> None:
    drafter = _save(verifier, tmp_path / "dflash", "dflash", "--block-size", "8")
    result = _doctor(verifier, drafter)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PROBLEM" not in result.stdout
    assert "plain RoPE" in result.stdout and "served as trained" in result.stdout
    spec = _serve_config(result.stdout)
    assert spec == {"method": "dflash", "model": str(drafter), "num_speculative_tokens": 7}
    assert result.stdout.split("serve it:\n")[1].strip().startswith(f"vllm serve {verifier} ")


def test_saved_as_upstream_does_is_refused(verifier: Path, tmp_path: Path) -> None:
    flags = ("--num-layers", "2", "--full-attention-indices", "0", "1")
    drafter = _save(verifier, tmp_path / "dflash", "dflash", *flags, **FIXES_OFF)
    result = _doctor(verifier, drafter)
    assert result.returncode == 1
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(f"speculators_qwen_compat: error: --drafter {drafter}: ")
    assert "mrope_section" in error and "does not support M-RoPE yet" in error
    assert "sliding_window_non_causal true" in error
    assert f"repair-drafter {drafter} --output {drafter}-served" in error


def test_bad_folders_name_their_problem(verifier: Path, tmp_path: Path) -> None:
    """Layer ids past the verifier's layers, a pruned vocabulary without its mapping, no mask
    token: each is one named problem; the serve line is still printed."""
    saved = _save(verifier, tmp_path / "good", "dflash")
    edits = {
        "layers": ({"aux_hidden_state_layer_ids": [1, 2, 9]}, "[9] outside the verifier's 0-4"),
        "vocab": ({"draft_vocab_size": 256}, "but no d2t mapping saved"),
        "mask": ({"mask_token_id": None}, "none saved (vLLM requires mask_token_id"),
    }
    for name, (edit, expected) in edits.items():
        folder = shutil.copytree(saved, tmp_path / name)
        config = json.loads((folder / "config.json").read_text())
        config.update(edit)
        (folder / "config.json").write_text(json.dumps(config))
        result = _doctor(verifier, folder)
        assert result.returncode == 1, name
        assert expected in result.stderr, (name, result.stderr)
        assert "serve it:" in result.stdout


def test_a_saved_token_count_other_than_the_blocks_is_named(verifier: Path, tmp_path: Path) -> None:
    """vLLM takes speculators_config's speculative_tokens when the serve line gives none: a
    folder whose count is not its block's is a named problem; the line passes the block's."""
    folder = _save(verifier, tmp_path / "dflash", "dflash", "--block-size", "8")
    config = json.loads((folder / "config.json").read_text())
    config["speculators_config"]["proposal_methods"][0]["speculative_tokens"] = 3
    (folder / "config.json").write_text(json.dumps(config))
    result = _doctor(verifier, folder)
    assert result.returncode == 1
    assert "3 saved in speculators_config, but the block drafts 7" in result.stderr
    assert _serve_config(result.stdout)["num_speculative_tokens"] == 7


def test_missing_drafter_folder_is_one_line(verifier: Path, tmp_path: Path) -> None:
    result = _doctor(verifier, tmp_path / "nowhere")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"speculators_qwen_compat: error: --drafter {tmp_path / 'nowhere'}: no "
        f"{tmp_path / 'nowhere' / 'config.json'}"
    )


def test_a_folder_with_a_space_and_a_torn_weights_file(verifier: Path, tmp_path: Path) -> None:
    """The serve line is one a shell runs as printed (a folder name with a space and a quote);
    a weights file cut short is one line naming the file, not a JSON or struct error."""
    saved = _save(verifier, tmp_path / "good", "dflash")
    folder = Path(shutil.copytree(saved, tmp_path / "my drafter's copy"))
    result = _doctor(verifier, folder)
    assert result.returncode == 0, result.stdout + result.stderr
    words = _serve_words(result.stdout)
    assert words[:3] == ["vllm", "serve", str(verifier)]
    assert _serve_config(result.stdout)["model"] == str(folder)

    weights = next(folder.glob("*.safetensors"))
    whole = weights.read_bytes()
    for cut in (20, len(whole) - 1):  # inside the header; one byte of the last tensor
        weights.write_bytes(whole[:cut])
        result = _doctor(verifier, folder)
        assert result.returncode == 1, cut
        error = result.stderr.strip().splitlines()
        assert len(error) == 1, result.stderr
        assert error[0].startswith("speculators_qwen_compat: error: --drafter ")
        assert f"{weights.name} is not a readable safetensors file" in error[0]
    weights.unlink()
    result = _doctor(verifier, folder)
    assert result.returncode == 1
    assert "no *.safetensors tensors in" in result.stderr


def test_a_config_value_of_the_wrong_type_is_one_line(verifier: Path, tmp_path: Path) -> None:
    saved = _save(verifier, tmp_path / "good", "dflash")
    folder = Path(shutil.copytree(saved, tmp_path / "edited"))
    saved_config = json.loads((folder / "config.json").read_text())
    edits = {  # what vLLM reads as integers, given otherwise
        "aux_hidden_state_layer_ids": ["one", "two"],
        "block_size": "8",
        "mask_token_id": 5.5,
    }
    for key, value in edits.items():
        (folder / "config.json").write_text(json.dumps({**saved_config, key: value}))
        result = _doctor(verifier, folder)
        assert result.returncode == 1, key
        error = result.stderr.strip().splitlines()
        assert len(error) == 1, result.stderr
        assert "config.json holds a value of an unexpected type or shape" in error[0]
        assert key in error[0], error[0]
    (folder / "config.json").write_text(json.dumps([saved_config]))
    result = _doctor(verifier, folder)
    error = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(error) == 1, result.stderr
    assert "config.json holds a JSON list, not an object" in error[0]
