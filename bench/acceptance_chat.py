"""Acceptance bench, on-policy arm, data steps: chat prompts, placeholder replies, states.

Run by a release's Python (tools/release_python.sh RELEASE bench/acceptance_chat.py ...), with
the verifier bench/acceptance_data.py built:

- ``prompts VERIFIER OUT TRAIN HELDOUT NEW``: TRAIN + HELDOUT user prompts of the verifier's
  corpus (bench/verifier_corpus.py's one-turn kinds, a seed of their own). Writes
  ``OUT/conversations.jsonl``, the training prompts as users send them here:
  ShareGPT rows whose assistant turn is a placeholder ("OK.", ...) written to get past the
  strict template; and the held-out prompts rendered by the verifier's chat template with the
  generation prompt, thinking off (what ``regenerate-responses`` asks the server for), each
  continued by the verifier's greedy reply (transformers, float32, at most NEW tokens), as
  ``OUT/heldout.pt`` and
  ``OUT/heldout_prompts.json`` (bench/acceptance_data.py ``write_heldout``).
- ``states VERIFIER PREPARED OUT``: prepare_data's output ``PREPARED`` (``input_ids``,
  ``loss_mask``) with transformers' float32 hidden states of every row, in speculators'
  offline layout at ``OUT`` (bench/acceptance_data.py ``write_offline``), as the fixes-off/on
  cases train from.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402
import verifier_corpus  # noqa: E402
from acceptance_data import AUX_LAYERS, greedy_replies, write_heldout, write_offline  # noqa: E402
from verifier_text import verifier_states  # noqa: E402

#: the boilerplate replies docs/formats.md's data warnings name
PLACEHOLDERS = ("OK.", "Sure.", "Got it.")
SEED = 4  # the verifier trained on seed 1, was checked on 2, the cases use 3


def load_verifier(folder: Path):  # -> (model, its final norm, its tokenizer)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    return model, model.model.norm, AutoTokenizer.from_pretrained(str(folder))


def prompts(verifier: Path, out: Path, train: int, heldout: int, new: int) -> None:
    model, norm, tokenizer = load_verifier(verifier)
    stop = tokenizer.convert_tokens_to_ids("<|im_end|>")
    texts = verifier_corpus.user_prompts(train + heldout, SEED)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "conversations.jsonl").open("w", encoding="utf-8") as sink:
        for i, text in enumerate(texts[:train]):
            turns = [{"from": "human", "value": text},
                     {"from": "gpt", "value": PLACEHOLDERS[i % len(PLACEHOLDERS)]}]  # fmt: skip
            sink.write(json.dumps({"id": f"prompt-{i}", "conversations": turns}) + "\n")
    chats = []
    for text in texts[train:]:
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True,
            enable_thinking=False,
        )  # fmt: skip
        chats.append(tokenizer(rendered, add_special_tokens=False)["input_ids"])
    rows = []
    for chat, reply in zip(chats, greedy_replies(model, chats, stop, new), strict=True):
        rows += verifier_states(model, norm, torch.tensor([chat + reply]), AUX_LAYERS)
    write_heldout(rows, [len(c) for c in chats], out)
    print(json.dumps({"train": train, "heldout": heldout, "prompt_tokens": list(map(len, chats))}))


def states(verifier: Path, prepared: Path, out: Path) -> None:
    from datasets import load_from_disk

    model, norm, _ = load_verifier(verifier)
    dataset = load_from_disk(str(prepared))
    rows, masks = [], []
    for record in dataset:
        ids = torch.tensor([list(record["input_ids"])], dtype=torch.long)
        rows += verifier_states(model, norm, ids, AUX_LAYERS)
        masks.append([int(x) for x in record["loss_mask"]])
    write_offline(rows, masks, out)
    supervised = sum(map(sum, masks))
    print(json.dumps({"rows": len(rows), "tokens": sum(map(len, masks)), "supervised": supervised}))


if __name__ == "__main__":
    if sys.argv[1] == "prompts":
        prompts(Path(sys.argv[2]), Path(sys.argv[3]), *map(int, sys.argv[4:7]))
    else:
        states(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
