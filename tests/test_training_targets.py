"""The targets upstream's trainer computes are the verifier's greedy tokens with the fixes on, and
are not without them (speculators 0.8.1 and 0.9.0, their own Trainer on CPU).

Oracle: transformers' float32 forward of the tiny verifier (verifier_text.py); its argmax at each
position is the verifier's greedy token (random token rows: the norm convention does not depend
on the text; the acceptance bench trains on text the verifier wrote itself). Under test: what
upstream's drafter feeds its loss, ``verifier_lm_head(verifier_norm(h))`` (EAGLE-3
``models/eagle3/core.py``, DFlash ``models/dflash/core.py``), captured with forward hooks while
upstream's Trainer takes its steps over upstream's dataloader. Each row the hooks see is matched
to its position by its pre-norm state. This is what cannot be noise: a wrong norm convention
turns ~100% agreement into a few percent (measured 100% vs 9% for DFlash on 0.9.0); how much
better the drafter gets is the acceptance bench's (bench/acceptance.py).

Releases: 0.8.1 and 0.9.0, the two with the Trainer (0.5-0.7 train through the git-only
``scripts/train.py``; their verifier_norm is checked module by module in
test_training_fixes.py). Cases: EAGLE-3 on the dense verifier (wrong in every release) and
DFlash on the MoE verifier (``Qwen3RMSNorm`` in 0.8.1, a model-type list without
``qwen3_5_moe`` in 0.9.0). About 1 CPU minute per release.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import drafters
import pytest
import tiny_checkpoints as tiny
import torch
from conftest import RELEASE
from packaging.version import Version
from verifier_text import verifier_states

import speculators_qwen_compat as compat

pytestmark = pytest.mark.skipif(Version("0.8") > RELEASE, reason="the Trainer is 0.8's and 0.9's")

CASES = [("eagle3", "qwen35"), ("dflash", "qwen35_moe")]
LAYERS = [int(i) for i in drafters.TARGET_LAYERS]
ROWS, LENGTH, PROMPT = 6, 40, 8


@pytest.fixture(scope="module")
def verifiers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any, list]]:
    """kind -> (checkpoint folder, transformers model, its states on random token rows)."""
    root = tmp_path_factory.mktemp("trained-like")
    out = {}
    for kind in sorted({kind for _, kind in CASES}):
        folder = tiny.write_checkpoint(root / kind, kind, trained_like=True)
        model = tiny.build_model(kind, trained_like=True)
        ids = torch.randint(3, 1200, (ROWS, LENGTH), generator=torch.Generator().manual_seed(0))
        out[kind] = (folder, model, verifier_states(model, tiny.final_norm(model), ids, LAYERS))
    return out


def trainer_targets(folder: Path, speculator_type: str, states: list, work: Path) -> list:
    """(pre-norm row, targets row) for every row upstream's drafter turned into targets during
    one epoch of upstream's Trainer over ``states`` (one sample per batch)."""
    from cpu_trainer import on_cpu
    from speculators.models.eagle3.data import shift_batch
    from speculators.train.data import BaseDataset
    from speculators.train.dataloader import _setup_dataloader
    from speculators.train.trainer import Trainer, TrainerConfig

    drafter = drafters.build_drafter(folder, speculator_type, work / "build")
    length = len(states[0].input_ids)

    class Samples(BaseDataset):
        def _compute_approx_lengths(self) -> list[int]:
            return [length] * len(states)

        def __len__(self) -> int:
            return len(states)

        def _get_raw_data(self, index: int) -> dict:
            row = states[index]
            mask = torch.zeros(length, dtype=torch.bool)
            mask[PROMPT:] = True  # an answer after a prompt, as prepare_data masks it
            return {
                "input_ids": row.input_ids.clone(),
                "hidden_states": row.aux.clone(),
                "verifier_last_hidden_states": row.pre_norm.clone(),
                "loss_mask": mask,
            }

    extra = ["--block-size", "4", "--max-anchors", "16"] if speculator_type == "dflash" else []
    args = drafters.cli_args(
        folder, speculator_type, work, "--loss-implementation", "eager", *extra
    )  # fmt: skip
    train_kwargs, _ = type(drafter).get_trainer_kwargs(**vars(args))
    config = TrainerConfig(
        lr=1e-4, num_epochs=1, save_path=str(work / "ckpt"), train_call_kwargs=train_kwargs,
        scheduler_type="none", hidden_states_dtype=torch.float32, max_steps=len(states),
    )  # fmt: skip
    inputs: list[torch.Tensor] = []
    pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
    norm_hook = drafter.verifier_norm.register_forward_pre_hook(
        lambda _m, args: inputs.append(args[0].detach().reshape(-1, args[0].shape[-1]))
    )
    head_hook = drafter.verifier_lm_head.register_forward_hook(
        lambda _m, _i, out: pairs.append((inputs.pop(), out.detach().reshape(-1, out.shape[-1])))
    )
    try:
        with on_cpu():
            loader = _setup_dataloader(
                Samples(max_len=length, hidden_states_dtype=torch.float32), length, tiny.HIDDEN,
                num_workers=0, prefetch_factor=None,
                preprocess=shift_batch if speculator_type == "eagle3" else None,
            )  # fmt: skip
            Trainer(drafter, config, loader, None).train_epoch(0)
    finally:
        norm_hook.remove()
        head_hook.remove()
    return pairs


def agreement(pairs: list, states: list) -> tuple[float, int]:
    """Share of target rows whose argmax is the verifier's greedy token at the position whose
    pre-norm state the row was computed from; (share, rows)."""
    table = torch.cat([s.pre_norm for s in states])
    greedy = torch.cat([s.greedy for s in states])
    hits = total = 0
    for pre_norm, targets in pairs:
        keep = pre_norm.abs().sum(-1) > 0  # padding rows of a packed batch
        if not keep.any():
            continue
        distance = torch.cdist(pre_norm[keep].float(), table)
        nearest = distance.argmin(-1)
        assert float(distance.min(-1).values.max()) < 1e-3, "a target row of unknown origin"
        hits += int((targets[keep].argmax(-1) == greedy[nearest]).sum())
        total += int(keep.sum())
    return hits / max(total, 1), total


@pytest.mark.parametrize(("speculator_type", "kind"), CASES)
def test_targets_are_the_verifiers_greedy_tokens(
    verifiers: dict, tmp_path: Path, speculator_type: str, kind: str
) -> None:
    folder, _, states = verifiers[kind]
    was = compat.installed()
    measured = {}
    try:
        for fixes in ("off", "on"):
            compat.install() if fixes == "on" else compat.uninstall()
            pairs = trainer_targets(folder, speculator_type, states, tmp_path / fixes)
            measured[fixes] = agreement(pairs, states)
    finally:
        compat.install() if was else compat.uninstall()
    (on, rows_on), (off, rows_off) = measured["on"], measured["off"]
    assert rows_on >= 100 and rows_off >= 100, measured
    assert on >= 0.97, f"fixes on: targets agree with the verifier on {on:.1%} of {rows_on}"
    assert off <= 0.5, (
        f"fixes off: {RELEASE} {speculator_type} targets agree on {off:.1%} for {kind}: upstream "
        "computes the verifier's final norm itself now; the verifier_norm fix can retire for it"
    )
