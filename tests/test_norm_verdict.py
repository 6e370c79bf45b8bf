"""The verifier-norm verdict against what each release's own drafters compute.

Every drafter type the installed release trains is built and saved with the switch off for tiny
dense and MoE Qwen3.5 verifiers and an ``x*w`` control (tests/programs/upstream_norm_folders.py),
and its verifier_norm is run beside the verifier's own final norm (transformers' module): that
agreement is the oracle. The release table (training/upstream_norms.py), the verdict on the saved
folder (training/norm_verdict.py) and ``doctor --drafter``'s line must all say the same.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXES_OFF, PROGRAMS, RELEASE, release_command, run_program, subprocess_env

from speculators_qwen_compat.training import norm_convention as nc
from speculators_qwen_compat.training import norm_verdict as nv
from speculators_qwen_compat.training import upstream_norms as un

KINDS = ("qwen35", "qwen35_moe", "llama")


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, bool]:
    """{saved folder: its verifier_norm computes what the verifier's own norm does}."""
    out = tmp_path_factory.mktemp("upstream-norms")
    result = run_program("upstream_norm_folders", str(out), *KINDS, **FIXES_OFF)
    assert result.returncode == 0, result.stderr[-3000:]
    return {Path(k): v for k, v in json.loads((out / "answers.json").read_text()).items()}


def _config(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text())


def _served_types(folder: Path) -> tuple[str, ...]:
    """The model types of the verifier a folder was built for, as doctor reads ``--model``
    (0.5.0 records no verifier architectures: the served verifier's config tells)."""
    config = _config(folder.parent / folder.name.split("-", 1)[0])
    text = config.get("text_config") or config
    return tuple(c["model_type"] for c in (text, config))


def test_release_is_in_the_table() -> None:
    assert str(RELEASE) in un.tabled_releases()


def test_table_is_each_releases_own_norm(upstream: dict[Path, bool]) -> None:
    """What the table says this release builds, for each saved type and verifier family, equals
    the verifier's convention exactly where upstream's own norm agrees with the verifier's."""
    assert len(upstream) >= len(KINDS)
    for folder, agrees in upstream.items():
        config = _config(folder)
        assert config["speculators_version"] == str(RELEASE)
        types = nv.verifier_types(config, _served_types(folder))
        verifier = nc.ONE_PLUS_WEIGHT if nc.uses_one_plus_weight(types) else nc.TIMES_WEIGHT
        built = un.upstream_builds(str(RELEASE), config["speculators_model_type"], types)
        assert (built == verifier) == agrees, (folder.name, built, verifier, agrees)


def test_verdict_on_each_folder(upstream: dict[Path, bool]) -> None:
    """The verdict from the folder alone (no record, no verifier config): right where upstream's
    norm is the verifier's, mis-scaled elsewhere; both kinds occur for Qwen3.5 verifiers."""
    words = {}
    for folder, agrees in upstream.items():
        verdict = nv.judge(_config(folder), None, _served_types(folder))
        assert verdict.word == (nv.RIGHT if agrees else nv.MIS_SCALED), (folder.name, verdict)
        words[folder.name] = verdict.word
    assert all(w == nv.RIGHT for n, w in words.items() if n.startswith("llama-"))
    assert any(w == nv.MIS_SCALED for n, w in words.items() if n.startswith("qwen35_moe-"))


def test_doctor_line_and_exit(upstream: dict[Path, bool]) -> None:
    """``doctor --drafter`` on a mis-scaled and on a right EAGLE-3/DFlash folder: one line
    ``verifier norm: WORD: why``; mis-scaled exits 1 and names the fine-tune command."""
    cases = {agrees: folder for folder, agrees in upstream.items()
             if folder.name.split("-", 1)[1] in ("eagle3", "dflash")
             and not folder.name.startswith("llama-")}  # fmt: skip
    for agrees, folder in cases.items():
        verifier = folder.parent / folder.name.split("-", 1)[0]
        result = subprocess.run(
            [sys.executable, "-m", "speculators_qwen_compat", "doctor", "--model", str(verifier),
             "--drafter", str(folder)],
            capture_output=True, text=True, env=subprocess_env(), timeout=300,
        )  # fmt: skip
        lines = [x for x in result.stdout.splitlines() if x.startswith("verifier norm:")]
        assert len(lines) == 1, result.stdout
        word = nv.RIGHT if agrees else nv.MIS_SCALED
        assert lines[0].startswith(f"verifier norm: {word}: speculators {RELEASE} "), lines[0]
        if not agrees:
            assert result.returncode == 1
            assert f"--from-pretrained {folder}" in result.stderr
        else:  # its M-RoPE keys (0.7+) are the only other problem
            assert "verifier norm" not in result.stderr


def test_unknown_release_says_what_would_tell(upstream: dict[Path, bool]) -> None:
    folder = next(iter(upstream))
    types = _served_types(folder)
    config = {**_config(folder), "speculators_version": "0.10.0"}
    verdict = nv.judge(config, None, types)
    assert verdict.word == nv.UNKNOWN
    assert "not in the release table" in verdict.why and "0.10.0" in verdict.why
    config.pop("speculators_version")
    assert "records no speculators_version" in nv.judge(config, None, types).why
    assert "family is not recorded" in nv.judge({**config, "speculators_config": {}}, None).why


#: The release whose drafters are judged here in this venv: a user's 0.8.1 drafter checked in an
#: 0.9.0 venv (and the other way round in the 0.8.1 suite).
OTHER = "0.8.1" if str(RELEASE) != "0.8.1" else "0.9.0"


@pytest.fixture(scope="module")
def other_release(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, bool]:
    out = tmp_path_factory.mktemp(f"upstream-norms-{OTHER}")
    command, env = release_command(
        OTHER, str(PROGRAMS / "upstream_norm_folders.py"), str(out), "qwen35", **FIXES_OFF
    )
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return {Path(k): v for k, v in json.loads((out / "answers.json").read_text()).items()}


def test_verdict_is_the_drafters_release_not_this_venvs(other_release: dict[Path, bool]) -> None:
    """Folders another release saved, judged here: the verdict follows that release's norm
    (0.8.1 dense DFlash is mis-scaled, 0.9.0's is right), through doctor as a user runs it."""
    for folder, agrees in other_release.items():
        assert _config(folder)["speculators_version"] == OTHER
        verdict = nv.judge(_config(folder), None, _served_types(folder))
        assert verdict.word == (nv.RIGHT if agrees else nv.MIS_SCALED), (folder.name, verdict)
    folder = next(f for f in other_release if f.name == "qwen35-dflash")
    result = subprocess.run(
        [sys.executable, "-m", "speculators_qwen_compat", "doctor", "--model",
         str(folder.parent / "qwen35"), "--drafter", str(folder)],
        capture_output=True, text=True, env=subprocess_env(), timeout=300,
    )  # fmt: skip
    word = nv.RIGHT if other_release[folder] else nv.MIS_SCALED
    assert f"verifier norm: {word}: speculators {OTHER} dflash" in result.stdout, result.stdout
    assert (word == nv.MIS_SCALED) == (OTHER == "0.8.1")
