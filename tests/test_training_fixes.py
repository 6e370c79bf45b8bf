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
from speculators_qwen_compat.training import norm_convention as nc

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


def _pre_norm_states(verifier: Any, input_ids: Any) -> tuple[Any, Any, Any]:
    """(hidden states of layers 1-3, last pre-norm hidden state, logits) of the real verifier."""
    captured: dict[str, Any] = {}
    norm = tiny.final_norm(verifier)
    handle = norm.register_forward_pre_hook(lambda _m, args: captured.setdefault("h", args[0]))
    with torch.no_grad():
        out = verifier(input_ids=input_ids[None], output_hidden_states=True)
    handle.remove()
    layers = torch.cat([out.hidden_states[int(i)][0] for i in drafters.TARGET_LAYERS], dim=-1)
    return layers, captured["h"][0], out.logits[0]


@pytest.mark.skipif(Version("0.9") > RELEASE, reason="the trainer step is checked on 0.9")
def test_one_training_step_through_upstreams_trainer(
    fixes_on: None, checkpoints: dict, verifiers: dict, tmp_path: Path
) -> None:
    """EAGLE-3 for the MoE verifier: its targets are the verifier's own logits, and one step of
    upstream's Trainer (its DataLoader, collate, shift_batch, loss, optimizer) moves the draft
    and never the frozen verifier norm."""
    from cpu_trainer import on_cpu
    from speculators.models.eagle3.data import shift_batch
    from speculators.train.data import BaseDataset
    from speculators.train.dataloader import _setup_dataloader
    from speculators.train.trainer import Trainer, TrainerConfig

    verifier = verifiers["qwen35_moe"]
    drafter = drafters.build_drafter(checkpoints["qwen35_moe"], "eagle3", tmp_path / "build")
    gen = torch.Generator().manual_seed(2)
    samples = []
    for _ in range(2):
        ids = torch.randint(0, tiny.VOCAB, (24,), generator=gen)
        layers, last, logits = _pre_norm_states(verifier, ids)
        with torch.no_grad():  # the drafter's targets are the verifier's logits
            targets = drafter.verifier_lm_head(drafter.verifier_norm(last))
        assert (targets - logits).abs().max().item() < 1e-4
        samples.append({"hidden_states": layers, "input_ids": ids,
                        "verifier_last_hidden_states": last,
                        "loss_mask": torch.ones(24, dtype=torch.bool)})  # fmt: skip

    class Samples(BaseDataset):
        def _compute_approx_lengths(self) -> list[int]:
            return [24] * len(samples)

        def __len__(self) -> int:
            return len(samples)

        def _get_raw_data(self, index: int) -> dict:
            return dict(samples[index])

    loader = _setup_dataloader(
        Samples(max_len=64), 64, tiny.HIDDEN, num_workers=0, prefetch_factor=None,
        preprocess=shift_batch,
    )  # fmt: skip
    args = drafters.cli_args(
        checkpoints["qwen35_moe"], "eagle3", tmp_path, "--loss-implementation", "eager",
        "--ttt-steps", "2",
    )  # fmt: skip
    train_kwargs, _ = type(drafter).get_trainer_kwargs(**vars(args))
    config = TrainerConfig(
        lr=1e-3, num_epochs=1, save_path=str(tmp_path / "ckpt"), train_call_kwargs=train_kwargs,
        max_steps=1, scheduler_type="none",
    )  # fmt: skip
    fc_before = drafter.fc.weight.detach().clone()
    norm_before = drafter.verifier_norm.weight.detach().clone()
    losses: list[float] = []
    drafter.register_forward_hook(lambda _m, _i, out: losses.append(float(out[1].detach())))
    with on_cpu():
        Trainer(drafter, config, loader, None).train_epoch(0)
    assert len(losses) == 1 and torch.isfinite(torch.tensor(losses[0])) and losses[0] > 0
    assert drafter.fc.weight.grad is not None and drafter.fc.weight.grad.abs().sum() > 0
    assert not torch.equal(drafter.fc.weight.detach(), fc_before)
    assert drafter.verifier_norm.weight.grad is None
    assert torch.equal(drafter.verifier_norm.weight.detach(), norm_before)
    assert type(drafter.verifier_norm).__name__ == "OnePlusWeightRMSNorm"


# --- mask token (0.6.0.2-0.9.0: resolve_mask_token_id loads an AutoProcessor) ---------------

MASK_TOKEN_RELEASE = Version("0.6") <= RELEASE


def _resolve(folder: Path) -> int:
    from speculators.train.utils import resolve_mask_token_id

    return resolve_mask_token_id(str(folder), tiny.VOCAB)


@pytest.mark.skipif(not MASK_TOKEN_RELEASE, reason="0.5.0 resolves through AutoTokenizer")
def test_pin_mask_token_needs_a_processor(fixes_off: None, checkpoints: dict) -> None:
    with pytest.raises((OSError, ImportError, ValueError)):
        _resolve(checkpoints["qwen35"])
        pytest.fail(f"{RELEASE} resolves the mask token without processor files: mask_token can "
                    "be retired for it")  # fmt: skip


@pytest.mark.skipif(not MASK_TOKEN_RELEASE, reason="0.5.0 resolves through AutoTokenizer")
def test_mask_token_from_the_tokenizer_is_upstreams_id(
    fixes_off: None, checkpoints: dict, caplog: pytest.LogCaptureFixture
) -> None:
    """Oracle: upstream's own resolution, fixes off, on a text-only folder with the same
    tokenizer files and vocabulary size, where AutoProcessor gives the tokenizer itself."""
    expected = _resolve(checkpoints["qwen3"])
    compat.install()
    try:
        with caplog.at_level("WARNING", logger="speculators_qwen_compat"):
            assert _resolve(checkpoints["qwen35"]) == expected
    finally:
        compat.uninstall()
    assert expected == 1210  # the first free slot after the tiny tokenizer's 1210 tokens
    assert sum("fix mask_token" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.skipif(not MASK_TOKEN_RELEASE, reason="0.5.0 resolves through AutoTokenizer")
def test_mask_token_keeps_upstreams_error_without_a_tokenizer(
    fixes_on: None, checkpoints: dict, tmp_path: Path
) -> None:
    (tmp_path / "config.json").write_bytes((checkpoints["qwen35"] / "config.json").read_bytes())
    with pytest.raises(OSError, match=r"image processor|preprocessor"):
        _resolve(tmp_path)


def _train_command(checkpoint: Path, save: Path) -> list[str]:
    return [
        "--dry-run", "--speculator-type", "dflash", "--verifier-name-or-path", str(checkpoint),
        "--save-path", str(save), "--draft-attn-impl", "sdpa", "--target-layer-ids",
        *drafters.TARGET_LAYERS,
    ]  # fmt: skip


def _check_dry_run(result: Any, save: Path, norm_line: str) -> None:
    import json

    output = " ".join((result.stdout + result.stderr).split())  # rich wraps log lines
    assert result.returncode == 0, output[-3000:]
    assert "fix mask_token" in output and "mask_token_id=1210" in output
    assert norm_line in output, output[-3000:]
    assert json.loads((save / "config.json").read_text())["mask_token_id"] == 1210


@pytest.mark.skipif(Version("0.9") > RELEASE, reason="--dry-run is 0.9's")
def test_train_dry_run_without_mask_token_id(checkpoints: dict, tmp_path: Path) -> None:
    import subprocess
    import sys

    from conftest import subprocess_env

    save = tmp_path / "draft"
    command = [sys.executable, "-m", "speculators_qwen_compat.train"]
    result = subprocess.run(
        [*command, *_train_command(checkpoints["qwen35"], save)],
        capture_output=True, text=True, env=subprocess_env(COLUMNS="400"), timeout=600,
    )  # fmt: skip
    _check_dry_run(result, save, "verifier_norm fix not needed for DFlashDraftModel")


@pytest.mark.skipif(Version("0.9") > RELEASE, reason="--dry-run is 0.9's")
def test_train_dry_run_under_torchrun(checkpoints: dict, tmp_path: Path) -> None:
    """Two CPU ranks (gloo: tests/cpu_trainer.py, through tests/cpu_site) of the train entry
    point."""
    import os
    import subprocess
    import sys

    from conftest import subprocess_env
    from cpu_trainer import subprocess_pythonpath

    save = tmp_path / "draft"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    env = subprocess_env(
        COLUMNS="400", PYTHONPATH=subprocess_pythonpath(os.environ.get("PYTHONPATH", ""))
    )
    result = subprocess.run(
        [*torchrun, "-m", "speculators_qwen_compat.train",
         *_train_command(checkpoints["qwen35_moe"], save)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    _check_dry_run(result, save, "replaced by an x*(1+w) RMS norm")


# --- doctor's training view ------------------------------------------------------------------


def _training_view(folder: Path) -> dict[str, str]:
    import io

    from speculators_qwen_compat.doctor.training_view import print_training_view

    out = io.StringIO()
    print_training_view(str(folder), out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"training (speculators {RELEASE}")
    return {line.split(":", 1)[0].strip(): line.split(":", 1)[1] for line in lines[1:]}


@pytest.mark.parametrize("kind", ["qwen35_moe", "qwen35", "llama"])
def test_doctor_training_view(fixes_on: None, checkpoints: dict, kind: str) -> None:
    view = _training_view(checkpoints[kind])
    wrong = {t.strip() for t in view.get("verifier_norm wrong", " (").split("(")[0].split(",")}
    if kind == "llama":
        assert view["final norm"].split()[0] == nc.TIMES_WEIGHT
        assert "verifier_norm wrong" not in view
    else:
        assert view["final norm"].split()[0] == nc.ONE_PLUS_WEIGHT
        expected = {t for t in TYPES if not upstream_is_right(kind, t)}
        assert wrong == expected, view
        assert "fixed by verifier_norm" in view["verifier_norm wrong"]
    decoder = [v for k, v in view.items() if k.startswith("draft")]
    assert decoder and all(f"hidden_size={tiny.HIDDEN}" in v for v in decoder), view
    assert view["mask token"].split()[0] == "1210", view
    if MASK_TOKEN_RELEASE and kind != "llama":
        assert "fixed by mask_token" in view["mask token"]


# --- served_attention: a drafter vLLM would serve otherwise than it trains -----------------


@pytest.mark.skipif(Version("0.8") > RELEASE, reason="--full-attention-indices is 0.8+'s CLI")
@pytest.mark.parametrize("switch", ["on", "off"])
def test_mixed_drafter_refused_at_train_time(
    checkpoints: dict, tmp_path: Path, switch: str
) -> None:
    """A DFlash drafter with a full-attention layer beside causal sliding ones (vLLM 0.32
    serves every layer with one causal flag): with the fixes, upstream's Trainer refuses to
    start in one line naming the flags that fit; without, it starts (its first step then reads
    the loader)."""
    from cpu_trainer import on_cpu
    from speculators.train.trainer import Trainer, TrainerConfig

    from speculators_qwen_compat.core.errors import CompatError

    (compat.install if switch == "on" else compat.uninstall)()
    flags = ("--num-layers", "2", "--full-attention-indices", "1")
    drafter = drafters.build_drafter(checkpoints["qwen35"], "dflash", tmp_path / "run", *flags)
    config = TrainerConfig(lr=1e-3, num_epochs=1, save_path=str(tmp_path / "ckpt"),
                           train_call_kwargs={}, max_steps=1, scheduler_type="none")  # fmt: skip

    class NoBatches:  # read only once training starts
        def __getattr__(self, name: str) -> Any:
            raise LookupError(f"training started: it read the loader's {name}")

        def __iter__(self) -> Any:
            raise LookupError("training started: it iterated the loader")

        def __len__(self) -> int:
            return 1

    try:
        with on_cpu():
            trainer = Trainer(drafter, config, NoBatches(), None)  # type: ignore[arg-type]
            expected = CompatError if switch == "on" else LookupError
            with pytest.raises(expected) as raised:
                trainer.run_training()
    finally:
        compat.install()
    if switch == "on":
        message = str(raised.value)
        assert "\n" not in message
        assert "draft layer(s) 1 train bidirectional within the block" in message
        assert "--sliding-window-non-causal" in message
