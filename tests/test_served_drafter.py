"""Drafters saved for Qwen3.5/3.6 verifiers as vLLM 0.32 reads them (served_rope, served_attention).

Every tested release builds and saves each drafter type it trains, through its own construction
path (tests/drafters.py), for tiny Qwen3.5 verifiers (dense and MoE; tests/programs/
drafter_rotation.py); the drafter's own rotary embedding and upstream's own block mask say how it
trained. vLLM's own config reader, rotary embedding and DFlash causality resolver say how vLLM
serves the saved folder (tests/programs/vllm_drafter_rotation.py, in the vLLM venv). Pins record
what upstream saves without the fixes (vLLM's M-RoPE refusal) and say when they can retire.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import tiny_checkpoints as tiny
import torch
import vllm_server
from conftest import FIXES_OFF, PROGRAMS, release_command
from packaging.version import Version

from speculators_qwen_compat.core.releases import TESTED_RELEASES

pytestmark = pytest.mark.vllm

RELEASES = tuple(TESTED_RELEASES)
#: Releases whose trainer writes the verifier's mrope_section into the drafter (0.7: the
#: git-only script, as tests/drafters.py builds it); 0.6 writes its partial rotary factor.
WRITES_M_ROPE = tuple(r for r in RELEASES if Version(r) >= Version("0.7"))
WRITES_ROPE = tuple(r for r in RELEASES if Version(r) >= Version("0.6"))
#: vLLM refuses these with M-RoPE (draft models and parallel drafting); EAGLE-3 loads.
REFUSED_WITH_M_ROPE = ("dflash", "dflash2", "dspark", "peagle")
#: An image of 8 x 12 patches (4 x 6 after the 2 x 2 merge: 24 tokens) at token 5 of 40.
IMAGE = {"tokens": 40, "offset": 5, "grid": [1, 8, 12]}


def _run(command: list[str], env: dict[str, str], timeout: float = 900) -> None:
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]


def _build(root: Path, release: str, verifiers: list[Path], name: str, *flags: str,
           **env: str) -> dict[str, Any]:  # fmt: skip
    out = root / name
    command, environment = release_command(
        release, str(PROGRAMS / "drafter_rotation.py"), str(root / "io.pt"), str(out),
        *map(str, verifiers), *(("--", *flags) if flags else ()), **env,
    )  # fmt: skip
    _run(command, environment)
    return torch.load(out / "trained.pt")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """{"trained": {case: {folder: answer}}, "vllm": {folder: answer}, "image": positions}."""
    root = tmp_path_factory.mktemp("served-drafters")
    verifiers = [tiny.write_checkpoint(root / kind, kind) for kind in tiny.ONE_PLUS_WEIGHT_KINDS]
    gen = torch.Generator().manual_seed(0)
    # text positions: the start of a sequence and the end of the tiny verifiers' 512
    positions = torch.cat([torch.arange(64), torch.arange(448, 512)])
    q = torch.randn(len(positions), 2, tiny.UNIT.head_dim, generator=gen)
    torch.save({"q": q, "positions": positions}, root / "io.pt")
    trained = {f"on-{r}": _build(root, r, verifiers, f"on-{r}") for r in RELEASES}
    for release in WRITES_ROPE:
        trained[f"off-{release}"] = _build(root, release, verifiers, f"off-{release}", **FIXES_OFF)
    newest = RELEASES[-1]
    for name, flags in {
        "all-full": ("dflash", "--num-layers", "2", "--full-attention-indices", "0", "1"),
        "mixed": ("dflash", "--num-layers", "2", "--full-attention-indices", "1"),
    }.items():
        trained[f"on-{name}"] = _build(root, newest, verifiers[:1], f"on-{name}", *flags)
        trained[f"off-{name}"] = _build(
            root, newest, verifiers[:1], f"off-{name}", *flags, **FIXES_OFF
        )
    trained.update(_repaired(trained))
    folders = [folder for case in trained.values() for folder in case]
    io = {"folders": folders, "q": q, "positions": positions,
          "image": {"verifier": str(verifiers[0]), **IMAGE}}  # fmt: skip
    torch.save(io, root / "vllm.pt")
    env = vllm_server.vllm_env(root / "vllm-scratch", torchvision=True)
    _run([str(vllm_server.VLLM_PYTHON), str(PROGRAMS / "vllm_drafter_rotation.py"),
          str(root / "vllm.pt")], env)  # fmt: skip
    answer = torch.load(root / "vllm.pt")
    return {
        "trained": trained,
        "vllm": dict(zip(folders, answer["answers"], strict=True)),
        "image": answer["image_positions"],
        "q": q,
        "positions": positions,
    }


def _repaired(trained: dict[str, Any]) -> dict[str, Any]:
    """``repair-drafter --config-only`` of every folder saved with the fixes off (but XPress, and
    the mixed-attention drafter no config serves): {"repaired-CASE": {copy: the original's
    trained answer}} (the weights are the original's, so is how it trained)."""
    import io

    from speculators_qwen_compat.doctor.repair_drafter import repair

    out: dict[str, Any] = {}
    for case, answers in trained.items():
        if not case.startswith("off-") or case == "off-mixed":
            continue
        copies = out.setdefault(f"repaired-{case[4:]}", {})
        for folder, answer in answers.items():
            if Path(folder).name == "xpress":
                continue
            verifier = str(Path(folder).parents[2] / Path(folder).parent.name)
            copy = f"{folder}-repaired"
            repair(folder, copy, verifier, True, io.StringIO())
            copies[copy] = answer
    return out


def _cases(served: dict, prefix: str) -> list[tuple[str, dict]]:
    """(folder, trained answer) of the runs named ``prefix``*, but XPress (vLLM has none)."""
    return [
        (folder, answer)
        for case, answers in served["trained"].items()
        if case.startswith(prefix)
        for folder, answer in answers.items()
        if Path(folder).name != "xpress"
    ]


def test_vllm_has_no_xpress(served: dict) -> None:
    """XPress (0.9.0) is the one drafter type vLLM 0.32's speculators reader does not know."""
    unread = {Path(f).name for f, a in served["vllm"].items() if "error" in a}
    assert unread == {"xpress"}
    assert all("Expected one of" in a["error"] for a in served["vllm"].values() if "error" in a)


def test_vllm_reads_no_m_rope_from_what_we_save(served: dict) -> None:
    """Every drafter type of every release, dense and MoE verifier: vLLM does not treat the
    saved config as M-RoPE (the condition of its refusal)."""
    cases = _cases(served, "on-")
    assert len(cases) >= 2 * 3 * len(RELEASES) - 2  # 0.5.0 trains EAGLE-3 and PEAGLE only
    m_rope = [folder for folder, _ in cases if served["vllm"][folder]["uses_mrope"]]
    assert m_rope == []


def test_rotation_vllm_applies_is_the_trained_one(served: dict) -> None:
    """On text positions (0-63 and 448-511), the query vLLM's rotary embedding rotates
    under the saved config equals the one the drafter's own rotary embedding and
    apply_rotary_pos_emb give: the rotation it trained with."""
    checked = 0
    for folder, answer in _cases(served, "on-"):
        vllm = served["vllm"][folder]["q_rotated"]
        assert not isinstance(answer["q"], str), f"{folder}: {answer['q']}"
        gap = (vllm.float() - answer["q"].float()).abs().max().item()
        assert gap < 1e-3, f"{folder}: max |vLLM - trained| = {gap}"
        assert (vllm - served["q"]).abs().max().item() > 0.1  # it does rotate
        checked += 1
    assert checked == len(_cases(served, "on-"))


@pytest.mark.parametrize("release", WRITES_M_ROPE)
def test_pin_upstream_saves_m_rope(served: dict, release: str) -> None:
    """Without the fix, each release from 0.7 saves every drafter with mrope_section: vLLM reads
    M-RoPE, and refuses DFlash, DFlash2, DSpark and PEAGLE ("Speculative Decoding with draft
    models or parallel drafting does not support M-RoPE yet"). served_rope can retire when this
    fails on the newest release (upstream stops writing it) or vLLM serves M-RoPE drafters."""
    answers = served["trained"][f"off-{release}"]
    assert answers
    assert all(served["vllm"][f]["uses_mrope"] for f in answers if Path(f).name != "xpress")
    assert any(Path(folder).name in REFUSED_WITH_M_ROPE for folder in answers)


def test_pin_upstream_06_saves_a_rotation_vllm_applies_otherwise(served: dict) -> None:
    """Without the fix, 0.6 saves the verifier's partial_rotary_factor 0.25 (M-RoPE keys
    dropped): vLLM loads it and rotates a quarter of each head where the drafter trained rotating
    all of it. Retires with 0.6."""
    answers = served["trained"]["off-0.6.0.2"]
    assert answers
    for folder, answer in answers.items():
        vllm = served["vllm"][folder]
        assert not vllm["uses_mrope"] and vllm["rope_parameters"]["partial_rotary_factor"] == 0.25
        assert (vllm["q_rotated"] - answer["q"]).abs().max().item() > 0.1, folder


def test_vllm_serves_block_layers_as_trained(served: dict) -> None:
    """Each DFlash-family layer's causality within the block: upstream's own block mask (as
    trained) equals vLLM's resolver (as served), for every release's defaults (0.6: all full
    attention) and a drafter trained with full attention on every layer."""
    checked = 0
    for folder, answer in _cases(served, "on-"):
        if answer["causal"] is None or "on-mixed" in folder:
            continue
        assert served["vllm"][folder]["causal"] == answer["causal"], folder
        checked += 1
    assert checked >= 10


def test_pin_vllm_serves_full_attention_causal(served: dict) -> None:
    """Without the fix, a DFlash drafter trained with full attention on every layer is served
    causal, where it trained bidirectional. served_attention can retire when vLLM reads per-layer
    causality from speculators configs."""
    (folder, answer), *_ = served["trained"]["off-all-full"].items()
    assert answer["causal"] == [False, False]
    assert served["vllm"][folder]["causal"] == [True, True]


def test_mixed_layers_cannot_be_served_as_trained(served: dict) -> None:
    """Causal sliding layers beside a bidirectional full one: vLLM's one flag makes them all
    alike either way (the fix refuses to train it: test_mixed_drafter_refused_at_train_time)."""
    (folder, answer), *_ = served["trained"]["on-mixed"].items()
    assert answer["causal"] == [True, False]
    assert len(set(served["vllm"][folder]["causal"])) == 1


def test_doctor_says_what_vllm_does(served: dict) -> None:
    """``doctor --drafter``'s rope and attention verdicts, on every folder saved with the fixes
    on and off, agree with vLLM's own reading of it (M-RoPE; causality against upstream's mask)."""
    from speculators_qwen_compat.doctor.drafter_view import check_drafter

    checked = 0
    for case, answers in served["trained"].items():
        for folder, answer in answers.items():
            if Path(folder).name == "xpress":
                continue
            verifier = str(Path(folder).parents[2] / Path(folder).parent.name)
            lines = dict(check_drafter(folder, verifier).lines)
            vllm = served["vllm"][folder]
            assert ("PROBLEM" in lines["rope"]) == vllm["uses_mrope"], (case, folder)
            if answer["causal"] is not None:
                as_trained = vllm["causal"] == answer["causal"]
                assert ("PROBLEM" not in lines["attention"]) == as_trained, (case, folder)
            checked += 1
    assert checked >= 40


def test_image_positions_differ_from_training(served: dict) -> None:
    """What vLLM does on image positions: a drafter without M-RoPE gets row 0 of the verifier's
    M-RoPE positions. Before the image they are the token index (as trained: speculators trains
    with position_ids = arange); every image token sits at the image's first index; text after
    the image continues from that index + max(grid h, w) after merging, i.e. 24 - 6 = 18
    positions earlier than the token index training used. Distances among tokens on one side of
    the image are kept (RoPE sees differences only); distances across it shrink."""
    row = served["image"][0]
    index = torch.arange(IMAGE["tokens"])
    start, count = IMAGE["offset"], 24
    assert torch.equal(row[:start], index[:start])
    assert torch.equal(row[start : start + count], torch.full((count,), start))
    after = slice(start + count, IMAGE["tokens"])
    assert torch.equal(row[after], index[after] - (count - 6))


def test_vllm_serves_repaired_copies_as_trained(served: dict) -> None:
    """What ``repair-drafter`` writes from each folder upstream saved (fixes off), for every
    release and the all-full-attention DFlash: vLLM reads no M-RoPE, rotates text positions as
    the drafter trained, and serves each block layer causal or bidirectional as it trained."""
    cases = _cases(served, "repaired-")
    assert len(cases) >= 2 * 3 * (len(WRITES_ROPE) - 1)
    for folder, answer in cases:
        vllm = served["vllm"][folder]
        assert not vllm["uses_mrope"], folder
        gap = (vllm["q_rotated"].float() - answer["q"].float()).abs().max().item()
        assert gap < 1e-3, f"{folder}: max |vLLM - trained| = {gap}"
        if answer["causal"] is not None:
            assert vllm["causal"] == answer["causal"], folder
