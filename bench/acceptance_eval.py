"""Acceptance bench, step 3: how often a trained drafter predicts the verifier, on held-out text.

Run by a release's Python with the fixes as in training (on: ``python -m
speculators_qwen_compat.run bench/acceptance_eval.py ...``; off: ``SPECULATORS_QWEN_COMPAT=0
python bench/acceptance_eval.py ...``): ``CHECKPOINT HELDOUT TYPE STEPS`` prints one JSON object.

The drafter is loaded as upstream loads it (``SpeculatorModel.from_pretrained``; EAGLE-3's
``__init__`` forces ``simple_flex_attention`` when the saved config names none, which fails on
CPU, so the config is loaded first and set to sdpa: 0.9.0 ``models/eagle3/core.py:48-52``) and
run through upstream's own forward on the held-out rows of bench/acceptance_data.py, rows
prepared as the trainer prepares them. The oracle is the verifier's greedy token at each
position (transformers' float32 forward, stored with the rows). Since the text is the
verifier's own greedy continuation, the teacher-forced chain equals the speculative chain up to
the first rejection: accepted length = leading drafts that equal the verifier's tokens.

- EAGLE-3: ``forward(..., ttt_steps=STEPS)`` after ``shift_batch``; draft step ``s`` at shifted
  position ``j`` predicts the verifier's greedy token at original position ``j + s + 1``
  (``models/eagle3/metrics.py:align_for_step``). Every anchor in the generated part counts.
- DFlash: ``_backbone_forward`` (anchors drawn by upstream, seeded); block slot ``i >= 1`` of
  the block anchored at ``a`` predicts the greedy token at ``a + i - 1`` (``sample_from_anchor``
  off); STEPS = block size - 1 drafts per block. Also the speculative loop on vLLM's schedule
  (``dflash_speculative_loop``): the figure to set beside vLLM's counters.
- Targets: ``verifier_lm_head(verifier_norm(h))`` of the loaded drafter (the modules the
  trainer computes its targets with) against the same greedy tokens.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import torch  # noqa: E402


def load(checkpoint: Path, speculator_type: str):  # -> an upstream drafter, float32, eval
    import speculators.models  # noqa: F401 (registers every type)
    from speculators.model import SpeculatorModel

    cls = SpeculatorModel.registry[speculator_type]
    config = cls.config_class.from_pretrained(str(checkpoint))
    config.transformer_layer_config._attn_implementation = "sdpa"
    return cls.from_pretrained(str(checkpoint), config=config).float().eval()


def tally(matches: torch.Tensor) -> dict:
    """``matches`` [anchors, steps] booleans -> per-step top-1 and mean accepted length."""
    leading = torch.cumprod(matches.long(), dim=1)
    return {
        "anchors": int(matches.shape[0]),
        "top1_per_step": [round(float(x), 5) for x in matches.float().mean(0)],
        "accepted_length": round(float(leading.sum(1).float().mean()), 5),
    }


def eagle3_matches(model, rows: list, prompts: list[int], steps: int) -> torch.Tensor:
    from speculators.models.eagle3.data import shift_batch

    found = []
    for row, prompt in zip(rows, prompts, strict=True):
        length = len(row.input_ids)
        sample = {
            "input_ids": row.input_ids,
            "hidden_states": row.aux,
            "verifier_last_hidden_states": row.pre_norm,
            "loss_mask": torch.ones(length, dtype=torch.bool),
            "lengths": torch.tensor([length]),
            "position_ids": torch.arange(length),
        }
        batch = shift_batch(sample)
        with torch.no_grad():
            drafts = model(
                hidden_states=batch["hidden_states"][None],
                input_ids=batch["input_ids"][None],
                document_ids=torch.zeros(1, length - 1, dtype=torch.long),
                position_ids=batch["position_ids"][None],
                ttt_steps=steps,
            )
        # anchors j: original position j + 1 in the generated part's context, all steps inside
        anchors = torch.arange(max(prompt - 2, 0), length - 1 - steps)
        step_hits = [drafts[s][0, anchors] == row.greedy[anchors + s + 1] for s in range(steps)]
        found.append(torch.stack(step_hits, dim=1))
    return torch.cat(found)


def dflash_matches(model, rows: list, prompts: list[int], max_anchors: int) -> torch.Tensor:
    block = model.block_size
    found = []
    torch.manual_seed(0)
    for row, prompt in zip(rows, prompts, strict=True):
        length = len(row.input_ids)
        mask = torch.zeros(length, dtype=torch.bool)
        mask[prompt:] = True
        with torch.no_grad():
            _, logits, _, aligned, indices = model._backbone_forward(
                row.aux[None], row.input_ids[None], mask[None], row.pre_norm[None],
                torch.zeros(1, length, dtype=torch.long), torch.arange(length)[None],
                max_anchors=max_anchors,
            )  # fmt: skip
        drafts = logits[0].argmax(-1).reshape(-1, block)
        positions = indices.reshape(-1, block)
        valid = aligned[0].reshape(-1, block)[:, 1:].bool().all(1) & (positions[:, -1] < length)
        truth = row.greedy[(positions[:, 1:] - 1).clamp(0, length - 1)]
        found.append((drafts[:, 1:] == truth)[valid])
    return torch.cat(found)


def dflash_speculative_loop(model, rows: list, prompts: list[int]) -> dict:
    """vLLM's schedule, offline: from the first generated position, the block anchored at the
    bonus token drafts, its leading matches with the text are accepted, and the next block is
    anchored after them and the verifier's correction. Counts what vLLM's counters count, on
    the float32 text; the random anchors of ``dflash_matches`` instead weigh every position
    alike, so a row where the verifier repeats one token adds an anchor per repetition."""
    block = model.block_size
    drafts = accepted = 0
    per_position = [0] * (block - 1)
    for row, prompt in zip(rows, prompts, strict=True):
        length, anchor = len(row.input_ids), prompt
        while anchor + block < length:
            end = anchor + block + 1
            mask = torch.zeros(1, end, dtype=torch.bool)
            mask[0, anchor] = True  # the one anchor: upstream draws it from the loss mask
            with torch.no_grad():
                _, logits, *_ = model._backbone_forward(
                    row.aux[None, :end], row.input_ids[None, :end], mask,
                    row.pre_norm[None, :end], torch.zeros(1, end, dtype=torch.long),
                    torch.arange(end)[None], max_anchors=1,
                )  # fmt: skip
            proposed = logits[0].argmax(-1)[1:block]
            truth = row.greedy[anchor : anchor + block - 1]
            run = 0
            while run < block - 1 and proposed[run] == truth[run]:
                per_position[run] += 1
                run += 1
            drafts, accepted, anchor = drafts + 1, accepted + run, anchor + run + 1
    return {"drafts": drafts, "drafted": drafts * (block - 1), "accepted": accepted,
            "per_position": per_position}  # fmt: skip


def target_agreement(model, rows: list, prompts: list[int]) -> float:
    hits = total = 0
    for row, prompt in zip(rows, prompts, strict=True):
        with torch.no_grad():
            targets = model.verifier_lm_head(model.verifier_norm(row.pre_norm[prompt - 1 : -1]))
        hits += int((targets.argmax(-1) == row.greedy[prompt - 1 : -1]).sum())
        total += targets.shape[0]
    return hits / total


def main(checkpoint: Path, heldout: Path, speculator_type: str, steps: int) -> None:
    data = torch.load(heldout, weights_only=False)
    rows, prompts = data["rows"], data["prompt"]
    if isinstance(prompts, int):  # held-out data written before prompt lengths were per row
        prompts = [prompts] * len(rows)
    model = load(checkpoint, speculator_type)
    if speculator_type == "dflash":
        matches = dflash_matches(model, rows, prompts, max_anchors=32)
    else:
        matches = eagle3_matches(model, rows, prompts, steps)
    result = tally(matches)
    if speculator_type == "dflash":
        result["loop"] = dflash_speculative_loop(model, rows, prompts)
    result["targets"] = round(target_agreement(model, rows, prompts), 5)
    result["verifier_norm"] = type(model.verifier_norm).__name__
    print(json.dumps(result))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
