"""Acceptance bench, step 1: the text a trained tiny verifier writes, as offline training data.

Run by a release's Python (tools/release_python.sh RELEASE bench/acceptance_data.py VERIFIER OUT
TRAIN HELDOUT NEW): VERIFIER is a trained verifier's folder (bench/verifier.py); TRAIN + HELDOUT
prompts of its corpus (bench/verifier_corpus.py, a seed of their own) in the chat template with
the generation prompt, each continued by the verifier's greedy reply (transformers' ``generate``,
float32, to ``<|im_end|>``, at most NEW tokens). Writes, in speculators' offline layout (0.8.1/0.9.0
``train/data.py`` read it with ``hs_connectors.FileTransfer``):

- ``OUT/verifier``: a link to VERIFIER (bf16 safetensors, as vLLM serves it);
- ``OUT/train``: an Arrow dataset (``input_ids``, ``loss_mask`` on the reply, ``seq_len``) saved
  with torch format (without it 0.9.0 ``train/data.py:314`` raises in ``torch.equal``), and
  ``hidden_states/hs_{i}.safetensors`` holding transformers' float32 states of the aux layers and
  the pre-norm last layer (``hidden_states`` [seq, 4, hidden], ``token_ids``);
- ``OUT/heldout.pt``: the held-out rows with transformers' states and the verifier's greedy
  token at every position (verifier_text.VerifierStates) and each row's prompt length, the
  oracle of the evaluation;
  ``OUT/heldout_prompts.json``: their prompts and greedy replies as token ids (for vLLM);
  ``OUT/heldout.jsonl``: the held-out conversations (OpenAI ``messages``), for the command.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402
import verifier_corpus  # noqa: E402
from pipeline.models import NUM_LAYERS  # noqa: E402
from verifier_text import verifier_states  # noqa: E402

#: speculators' default EAGLE-3 layers for 8 layers; the last pre-norm state is stored after them.
AUX_LAYERS = [2, NUM_LAYERS // 2, NUM_LAYERS - 3]
SEED = 3  # the verifier trained on seed 1 and was checked on seed 2: other conversations
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


def greedy_replies(model, prompts: list[list[int]], stop: int, new: int) -> list[list[int]]:
    """Each prompt's greedy reply (transformers, float32) up to and with ``stop``, at most
    ``new`` tokens; prompts of one length decoded together (no padding)."""
    replies: dict[int, list[int]] = {}
    by_length: dict[int, list[int]] = {}
    for i, prompt in enumerate(prompts):
        by_length.setdefault(len(prompt), []).append(i)
    for indices in by_length.values():
        for start in range(0, len(indices), BATCH):
            chunk = indices[start : start + BATCH]
            ids = torch.tensor([prompts[i] for i in chunk])
            with torch.no_grad():
                out = model.generate(
                    ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                    do_sample=False, eos_token_id=stop, pad_token_id=stop,
                )[:, ids.shape[1] :]  # fmt: skip
            for i, row in zip(chunk, out.tolist(), strict=True):
                replies[i] = row[: row.index(stop) + 1] if stop in row else row
    return [replies[i] for i in range(len(prompts))]


def chat_prompts(tokenizer, conversations: list[dict]) -> list[list[int]]:
    """Each conversation before its last assistant turn as token ids, in the chat template
    with the generation prompt (what vLLM's chat endpoint renders)."""
    ids = []
    for conversation in conversations:
        prompt, _ = verifier_corpus.prompt_and_reply(conversation)
        text = tokenizer.apply_chat_template(
            prompt["messages"], tokenize=False, add_generation_prompt=True
        )
        ids.append(tokenizer(text, add_special_tokens=False)["input_ids"])
    return ids


def main(verifier: Path, out: Path, train: int, heldout: int, new: int) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    link = out / "verifier"
    if not link.exists():
        link.symlink_to(verifier)
    # the composite class's text model is the dense one it wraps (bench/verifier_train.py): its
    # states on text are the text class's, read from the folder's language model
    model = AutoModelForCausalLM.from_pretrained(str(verifier), dtype=torch.float32).eval()
    norm = model.model.norm
    tokenizer = AutoTokenizer.from_pretrained(str(verifier))
    stop = tokenizer.convert_tokens_to_ids("<|im_end|>")
    conversations = verifier_corpus.conversations(train + heldout, SEED)
    prompts = chat_prompts(tokenizer, conversations)
    # the held-out conversations as users hand them to `speculators-qwen-compat acceptance`
    with (out / "heldout.jsonl").open("w", encoding="utf-8") as sink:
        sink.writelines(json.dumps(c) + "\n" for c in conversations[train:])
    replies = greedy_replies(model, prompts, stop, new)
    rows = []
    for prompt, reply in zip(prompts, replies, strict=True):
        rows += verifier_states(model, norm, torch.tensor([prompt + reply]), AUX_LAYERS)
    masks = [[0] * len(p) + [1] * len(r) for p, r in zip(prompts, replies, strict=True)]
    write_offline(rows[:train], masks[:train], out / "train")
    write_heldout(rows[train:], [len(p) for p in prompts[train:]], out)
    summary = {"verifier": str(verifier), "train": train, "heldout": heldout, "new": new,
               "reply_tokens": sum(map(len, replies))}  # fmt: skip
    summary["seconds"] = round(time.monotonic() - started, 1)
    (out / "data.json").write_text(json.dumps(summary))
    print(json.dumps(summary))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), *map(int, sys.argv[3:6]))
