"""Acceptance bench, step 1: a tiny verifier and the text it writes, as offline training data.

Run by a release's Python (tools/release_python.sh RELEASE bench/acceptance_data.py KIND OUT
TRAIN HELDOUT PROMPT NEW): builds the tiny Qwen3.5 verifier ``KIND`` (tests/pipeline/models.py:
sizes vLLM's CPU kernels accept, final norm and lm_head spread like a trained model's), samples
TRAIN + HELDOUT rows of PROMPT random tokens and NEW greedy tokens from it (transformers'
``generate``, float32), and writes, in speculators' offline layout (0.8.1/0.9.0 ``train/data.py``
read it with ``hs_connectors.FileTransfer``):

- ``OUT/verifier``: the checkpoint (bf16 safetensors, as vLLM serves it);
- ``OUT/train``: an Arrow dataset (``input_ids``, ``loss_mask`` on the generated part,
  ``seq_len``) saved with torch format (without it 0.9.0 ``train/data.py:314`` raises in
  ``torch.equal``), and ``hidden_states/hs_{i}.safetensors`` holding transformers' float32
  states of the aux layers and the pre-norm last layer (``hidden_states`` [seq, 4, hidden],
  ``token_ids``);
- ``OUT/heldout.pt``: the held-out rows with transformers' states and the verifier's greedy
  token at every position (verifier_text.VerifierStates) and each row's prompt length, the
  oracle of the evaluation;
  ``OUT/heldout_prompts.json``: their prompts and greedy continuations as token ids (for vLLM).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import torch  # noqa: E402
from pipeline.models import NUM_LAYERS, build_target  # noqa: E402
from verifier_text import verifier_states  # noqa: E402

#: speculators' default EAGLE-3 layers for 8 layers; the last pre-norm state is stored after them.
AUX_LAYERS = [2, NUM_LAYERS // 2, NUM_LAYERS - 3]
PROMPT_VOCAB = 1210  # prompts use the tiny tokenizer's ids only (vLLM checks prompt ids)
BATCH = 128  # rows decoded together: per-step overhead dominates at these sizes


def write_offline(rows: list, masks: list[list[int]], out: Path) -> None:
    """``rows`` (VerifierStates) with their loss masks in speculators' offline layout."""
    from datasets import Dataset
    from safetensors.torch import save_file

    (out / "hidden_states").mkdir(parents=True, exist_ok=True)
    records = []
    for i, (row, mask) in enumerate(zip(rows, masks, strict=True)):
        layers = row.aux.reshape(len(row.input_ids), len(AUX_LAYERS), -1)
        states = torch.cat([layers, row.pre_norm[:, None]], dim=1).contiguous()
        save_file(
            {"hidden_states": states, "token_ids": row.input_ids.contiguous()},
            str(out / "hidden_states" / f"hs_{i}.safetensors"),
        )
        records.append(
            {"input_ids": row.input_ids.tolist(), "loss_mask": mask, "seq_len": len(mask)}
        )
    Dataset.from_list(records).with_format("torch").save_to_disk(str(out))


def write_heldout(rows: list, prompts: list[int], out: Path) -> None:
    """The held-out rows (VerifierStates) and each one's prompt length: ``heldout.pt`` for the
    offline evaluation, ``heldout_prompts.json`` for vLLM (the prompts, and the continuations
    transformers' greedy decoding wrote)."""
    torch.save({"prompt": prompts, "layers": AUX_LAYERS, "rows": rows}, out / "heldout.pt")
    pairs = list(zip(rows, prompts, strict=True))
    served = {
        "prompts": [r.input_ids[:p].tolist() for r, p in pairs],
        "continuations": [r.input_ids[p:].tolist() for r, p in pairs],
    }
    (out / "heldout_prompts.json").write_text(json.dumps(served))


def main(kind: str, out: Path, train: int, heldout: int, prompt: int, new: int) -> None:
    from transformers import AutoModelForCausalLM

    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    folder = build_target(kind, out / "verifier", trained_like=True)
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    norm = model.model.norm
    rows = []
    for start in range(0, train + heldout, BATCH):
        count = min(BATCH, train + heldout - start)
        prompts = torch.randint(
            3, PROMPT_VOCAB, (count, prompt), generator=torch.Generator().manual_seed(start)
        )
        with torch.no_grad():
            ids = model.generate(
                prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=new,
                min_new_tokens=new, do_sample=False, pad_token_id=0,
            )  # fmt: skip
        rows += verifier_states(model, norm, ids, AUX_LAYERS)
    masks = [[0] * prompt + [1] * new for _ in range(train)]  # the generated part
    write_offline(rows[:train], masks, out / "train")
    write_heldout(rows[train:], [prompt] * heldout, out)
    summary = {"kind": kind, "train": train, "heldout": heldout, "prompt": prompt, "new": new}
    summary["seconds"] = round(time.monotonic() - started, 1)
    (out / "data.json").write_text(json.dumps(summary))
    print(json.dumps(summary))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), *map(int, sys.argv[3:7]))
