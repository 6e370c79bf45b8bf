"""Training fixes against tiny random Qwen3.5/3.6 checkpoints (dense and MoE), real wheels, CPU.

The oracle is the verifier itself: transformers' own ``model.language_model.norm`` of the tiny
checkpoint the drafter is built for. Drafters are built by the release's own training code
(drafters.py). Pins record what the release does without the fix and say when it can retire.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import drafters
import pytest
import tiny_checkpoints as tiny
import torch
from conftest import RELEASE
from packaging.version import Version

import speculators_qwen_compat as compat
from speculators_qwen_compat.fixes.training import norm_convention as nc

TYPES = drafters.drafter_types()


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny-verifiers")
    return {kind: tiny.write_checkpoint(root / kind, kind) for kind in tiny.KINDS}


@pytest.fixture(scope="session")
def verifiers() -> dict[str, Any]:
    return {kind: tiny.build_model(kind) for kind in tiny.KINDS}


@pytest.fixture
def fixes_on() -> Iterator[None]:
    was = compat.installed()
    compat.install()
    yield
    if not was:
        compat.uninstall()


@pytest.fixture
def fixes_off() -> Iterator[None]:
    was = compat.installed()
    compat.uninstall()
    yield
    if was:
        compat.install()


def _gap(drafter: Any, verifier: Any) -> float:
    h = torch.randn(4, tiny.HIDDEN, generator=torch.Generator().manual_seed(1)) * 3
    with torch.no_grad():
        return (drafter.verifier_norm(h) - tiny.final_norm(verifier)(h)).abs().max().item()


def upstream_is_right(kind: str, speculator_type: str) -> bool:
    """0.9.0 picks x*(1+w) for DFlash-family drafters of qwen3_5/qwen3_5_text (not the MoE)."""
    dflash_family = speculator_type not in ("eagle3", "peagle")
    return Version("0.9") <= RELEASE and dflash_family and kind == "qwen35"


@pytest.mark.parametrize("kind", tiny.ONE_PLUS_WEIGHT_KINDS)
@pytest.mark.parametrize("speculator_type", TYPES)
def test_verifier_norm_is_the_verifiers_norm(
    fixes_on: None, checkpoints: dict, verifiers: dict, tmp_path: Path, kind: str,
    speculator_type: str,
) -> None:  # fmt: skip
    drafter = drafters.build_drafter(checkpoints[kind], speculator_type, tmp_path)
    norm = drafter.verifier_norm
    assert _gap(drafter, verifiers[kind]) < 1e-5
    assert nc.convention_of(norm) == nc.ONE_PLUS_WEIGHT
    assert not norm.weight.requires_grad
    assert "verifier_norm.weight" in drafter.state_dict()
    assert nc.norm_eps(norm) == pytest.approx(tiny.final_norm(verifiers[kind]).eps)
    assert norm.weight.dtype == drafter.fc.weight.dtype


@pytest.mark.parametrize("kind", tiny.ONE_PLUS_WEIGHT_KINDS)
@pytest.mark.parametrize("speculator_type", TYPES)
def test_pin_upstream_verifier_norm(
    fixes_off: None, checkpoints: dict, verifiers: dict, tmp_path: Path, kind: str,
    speculator_type: str,
) -> None:  # fmt: skip
    drafter = drafters.build_drafter(checkpoints[kind], speculator_type, tmp_path)
    gap = _gap(drafter, verifiers[kind])
    if upstream_is_right(kind, speculator_type):
        assert gap < 1e-5, f"{RELEASE} {speculator_type} regressed for {kind} (gap {gap})"
    else:
        assert gap > 0.1, (
            f"{RELEASE} builds a right verifier_norm for {speculator_type} on {kind} by itself: "
            "the verifier_norm fix can be retired for it"
        )


@pytest.mark.parametrize("kind", ["qwen3", "llama"])
def test_times_weight_verifier_left_alone(
    fixes_on: None, checkpoints: dict, verifiers: dict, tmp_path: Path, kind: str
) -> None:
    for speculator_type in sorted({"eagle3", "dflash"} & set(TYPES)):
        drafter = drafters.build_drafter(checkpoints[kind], speculator_type, tmp_path)
        assert type(drafter.verifier_norm).__name__ != "OnePlusWeightRMSNorm"
        assert _gap(drafter, verifiers[kind]) < 1e-5


def test_from_pretrained_gets_the_fix(
    fixes_on: None, checkpoints: dict, verifiers: dict, tmp_path: Path
) -> None:
    """Fine-tuning a saved drafter (``--from-pretrained``) rebuilds it: the fix applies again."""
    from speculators.model import SpeculatorModel

    for speculator_type in sorted({"eagle3", "dflash"} & set(TYPES)):
        saved = tmp_path / speculator_type
        drafter = drafters.build_drafter(checkpoints["qwen35_moe"], speculator_type, tmp_path)
        drafter.save_pretrained(saved)
        loaded = SpeculatorModel.from_pretrained(str(saved))
        assert type(loaded.verifier_norm).__name__ == "OnePlusWeightRMSNorm", speculator_type
        assert _gap(loaded, verifiers["qwen35_moe"]) < 1e-5, speculator_type
        h = torch.randn(2, tiny.HIDDEN, requires_grad=True)
        loaded.verifier_norm(h).sum().backward()
        assert h.grad is not None and loaded.verifier_norm.weight.grad is None  # frozen


# transformers' own final-norm class per model type, to confirm the family by computation
FAMILY_NORMS = {
    "qwen3_5_text": ("qwen3_5", "Qwen3_5RMSNorm"),
    "qwen3_5_moe_text": ("qwen3_5_moe", "Qwen3_5MoeRMSNorm"),
    "qwen3_next": ("qwen3_next", "Qwen3NextRMSNorm"),
    "gemma": ("gemma", "GemmaRMSNorm"),
    "gemma2": ("gemma2", "Gemma2RMSNorm"),
    "gemma3_text": ("gemma3", "Gemma3RMSNorm"),
    "recurrent_gemma": ("recurrent_gemma", "RecurrentGemmaRMSNorm"),
    "vaultgemma": ("vaultgemma", "VaultGemmaRMSNorm"),
}
PLAIN_NORMS = {
    "llama": ("llama", "LlamaRMSNorm"),
    "qwen3": ("qwen3", "Qwen3RMSNorm"),
    "qwen3_moe": ("qwen3_moe", "Qwen3MoeRMSNorm"),
    "gemma3n_text": ("gemma3n", "Gemma3nRMSNorm"),
}


def _norm(module: str, name: str) -> Any:
    cls = getattr(importlib.import_module(f"transformers.models.{module}.modeling_{module}"), name)
    return cls(16, eps=1e-6)


@pytest.mark.parametrize("model_type", sorted(FAMILY_NORMS))
def test_family_member_normalises_with_one_plus_weight(model_type: str) -> None:
    assert model_type in nc.ONE_PLUS_WEIGHT_MODEL_TYPES
    assert nc.convention_of(_norm(*FAMILY_NORMS[model_type])) == nc.ONE_PLUS_WEIGHT


@pytest.mark.parametrize("model_type", sorted(PLAIN_NORMS))
def test_plain_types_are_not_in_the_family(model_type: str) -> None:
    assert model_type not in nc.ONE_PLUS_WEIGHT_MODEL_TYPES
    assert nc.convention_of(_norm(*PLAIN_NORMS[model_type])) != nc.ONE_PLUS_WEIGHT


def test_architectures_name_the_family() -> None:
    """A drafter config whose verifier config cannot be read still names its architectures."""
    assert nc.uses_one_plus_weight(nc.architecture_types(["Qwen3_5MoeForConditionalGeneration"]))
    assert not nc.uses_one_plus_weight(nc.architecture_types(["Qwen3ForCausalLM"]))
