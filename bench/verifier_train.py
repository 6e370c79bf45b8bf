"""Train a tiny verifier on learnable chats, on CPU, until its text is its own (issue 52, item 1).

Run by a release's Python (tools/release_python.sh RELEASE bench/verifier_train.py KIND DEST):
KIND is ``qwen3_5_text`` (dense) or ``qwen3_5_moe_text`` (MoE), DEST the folder to write
(bench/verifier.py names it by the recipe's hash); ``composite DENSE DEST`` wraps a trained dense
verifier in the composite Qwen3.6 class with processor files (the same logits on text).

The model starts as tests/tiny_checkpoints.py builds it at vLLM's CPU sizes, its final-norm
weights held at ~N(0, 0.5) (so ``x*w`` and ``x*(1+w)`` targets differ), and learns
bench/verifier_corpus.py's conversations, rendered by the tiny tokenizer's Qwen3.6-style
template, every token (AdamW, float32). Every ``EVAL_EVERY`` steps it answers the held-out prompts
greedily (transformers, float32, to ``<|im_end|>``) and in bfloat16; it stops early when its
replies are the corpus's on ``GOAL_CORRECT`` of them and bf16 agrees with float32 on
``GOAL_AGREE``, else after ``MAX_STEPS``, and is saved either way: the goal it must meet is
vLLM's (bench/verifier.py checks bf16 = float32 through vLLM), and training.json says how far it
learned the corpus. Writes the checkpoint in bf16 (as vLLM serves it), ``heldout.json`` (the
prompts as token ids, float32's replies from the saved weights) and ``training.json``.
"""

from __future__ import annotations

import copy
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import tiny_checkpoints as tiny  # noqa: E402
import torch  # noqa: E402
import verifier_corpus  # noqa: E402
from pipeline.models import COMPOSITE, TINY_KIND  # noqa: E402

TRAIN_CONVERSATIONS = 6000
HELDOUT = 96
BATCH = 16
LEARNING_RATE = 3e-3
WARMUP = 40
MAX_STEPS = 1200
EVAL_EVERY = 200
GOAL_CORRECT = 0.9
GOAL_AGREE = 0.97
MAX_NEW = 64
SEED = 0


def _tokenizer() -> Any:
    from transformers import AutoTokenizer

    from speculators_qwen_compat import demo

    return AutoTokenizer.from_pretrained(str(demo.MODEL_DIR))


def _ids(tokenizer: Any, conversation: dict[str, Any], generation_prompt: bool) -> list[int]:
    text = tokenizer.apply_chat_template(
        conversation["messages"], tools=conversation.get("tools"), tokenize=False,
        add_generation_prompt=generation_prompt,
    )  # fmt: skip
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _batches(rows: list[list[int]], generator: torch.Generator, pad: int) -> Any:
    """Endless batches of ``BATCH`` rows of similar length (rows sorted by length, cut into
    batches, the batches in a new order each pass), right-padded: little padding to pay for."""
    by_length = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    groups = [by_length[s : s + BATCH] for s in range(0, len(by_length) - BATCH + 1, BATCH)]
    while True:
        for g in torch.randperm(len(groups), generator=generator).tolist():
            picked = [rows[i] for i in groups[g]]
            width = max(map(len, picked))
            ids = torch.full((BATCH, width), pad)
            labels = torch.full((BATCH, width), -100)
            for i, row in enumerate(picked):
                ids[i, : len(row)] = torch.tensor(row)
                labels[i, : len(row)] = torch.tensor(row)
            yield ids, labels


@torch.no_grad()
def greedy(model: Any, prompts: list[list[int]], stop: int) -> list[list[int]]:
    """Each prompt's greedy reply up to and with ``stop`` (at most MAX_NEW tokens), prompts of
    one length decoded together (no padding for the linear-attention layers to mishandle)."""
    out: dict[int, list[int]] = {}
    by_length: dict[int, list[int]] = {}
    for i, prompt in enumerate(prompts):
        by_length.setdefault(len(prompt), []).append(i)
    for indices in by_length.values():
        ids = torch.tensor([prompts[i] for i in indices])
        generated = model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=MAX_NEW, do_sample=False,
            eos_token_id=stop, pad_token_id=stop,
        )[:, ids.shape[1] :]  # fmt: skip
        for i, row in zip(indices, generated.tolist(), strict=True):
            out[i] = row[: row.index(stop) + 1] if stop in row else row
    return [out[i] for i in range(len(prompts))]


def evaluate(model: Any, prompts: list[list[int]], replies: list[list[int]], stop: int) -> dict:
    model.eval()
    float32 = greedy(model, prompts, stop)
    # a bf16 copy: casting the model itself would round the weights it goes on training
    half = greedy(copy.deepcopy(model).to(torch.bfloat16), prompts, stop)
    model.train()
    return {
        "correct": sum(a == b for a, b in zip(float32, replies, strict=True)) / len(prompts),
        "bf16_agrees": sum(a == b for a, b in zip(float32, half, strict=True)) / len(prompts),
        "replies": float32,
    }


def main(kind: str, dest: Path) -> None:
    started = time.monotonic()
    torch.manual_seed(SEED)
    tokenizer = _tokenizer()
    stop = tokenizer.convert_tokens_to_ids("<|im_end|>")
    corpus = verifier_corpus.conversations(TRAIN_CONVERSATIONS, 1)
    train = [_ids(tokenizer, c, False) for c in corpus]
    prompts, replies = [], []
    for conversation in verifier_corpus.conversations(HELDOUT, 2):
        prompt, _ = verifier_corpus.prompt_and_reply(conversation)
        prompts.append(_ids(tokenizer, prompt, True))
        full = _ids(tokenizer, conversation, False)
        replies.append(full[len(prompts[-1]) : full.index(stop, len(prompts[-1])) + 1])
    model = tiny.build_model(TINY_KIND[kind], trained_like=True, sizes=tiny.VLLM, seed=SEED)
    # held where a trained model's are (N(0, 0.5)): x*w and x*(1+w) targets then differ
    tiny.final_norm(model).weight.requires_grad_(False)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, betas=(0.9, 0.98),
                                  weight_decay=0.0)  # fmt: skip

    def rate(step: int) -> float:
        if step < WARMUP:
            return (step + 1) / WARMUP
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, step / MAX_STEPS)))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
    batches = _batches(train, torch.Generator().manual_seed(SEED), tokenizer.pad_token_id or 0)
    losses: list[float] = []
    result: dict[str, Any] = {}
    step = 0
    # a smoke run of the bench's plumbing may cut the steps (never for a verifier it keeps)
    last = int(os.environ.get("VERIFIER_SMOKE_STEPS") or MAX_STEPS)
    for step in range(1, last + 1):
        ids, labels = next(batches)
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if step % 50 == 0:
            seconds = time.monotonic() - started
            print(
                f"step {step}: loss {sum(losses[-50:]) / 50:.3f} ({seconds:.0f}s)",
                file=sys.stderr,
                flush=True,
            )
        if step % EVAL_EVERY == 0:
            result = evaluate(model, prompts, replies, stop)
            mean = sum(losses[-EVAL_EVERY:]) / EVAL_EVERY
            print(f"step {step}: loss {mean:.3f}, correct {result['correct']:.2f}, bf16 agrees "
                  f"{result['bf16_agrees']:.2f}", file=sys.stderr, flush=True)  # fmt: skip
            if result["correct"] >= GOAL_CORRECT and result["bf16_agrees"] >= GOAL_AGREE:
                break
    model.eval().to(torch.bfloat16).save_pretrained(dest)
    # the float32 reference is the checkpoint as saved (bf16 weights) run in float32: what the
    # bench's data and vLLM's check start from
    result = {**result, "replies": greedy(model.to(torch.float32), prompts, stop)}
    result["correct"] = sum(a == b for a, b in zip(result["replies"], replies, strict=True))
    result["correct"] /= len(prompts)
    from speculators_qwen_compat import demo

    demo.write_model(dest, "qwen36")
    if kind in COMPOSITE:
        tiny.write_processor_files(dest)
    (dest / "heldout.json").write_text(json.dumps({
        "prompts": prompts, "float32": result.get("replies", []), "corpus": replies,
        "stop": stop,
    }))  # fmt: skip
    summary = {
        "kind": kind, "steps": step, "seconds": round(time.monotonic() - started, 1),
        "loss": round(sum(losses[-50:]) / len(losses[-50:]), 4),
        "correct": result.get("correct"), "bf16_agrees": result.get("bf16_agrees"),
    }  # fmt: skip
    (dest / "training.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary), flush=True)


def composite(dense: Path, dest: Path) -> None:
    """The composite Qwen3.6 class (``Qwen3_5ForConditionalGeneration``, a random vision tower,
    processor files) around the trained dense model's weights: the same text model, so the same
    logits on text, its held-out replies and training record carried over."""
    from transformers import AutoModelForCausalLM

    trained = AutoModelForCausalLM.from_pretrained(str(dense), dtype=torch.float32)
    model = tiny.build_model(TINY_KIND["qwen3_5"], trained_like=True, sizes=tiny.VLLM, seed=SEED)
    model.model.language_model.load_state_dict(trained.model.state_dict())
    model.lm_head.load_state_dict(trained.lm_head.state_dict())
    model.eval().to(torch.bfloat16).save_pretrained(dest)
    from speculators_qwen_compat import demo

    demo.write_model(dest, "qwen36")
    tiny.write_processor_files(dest)
    for name in ("heldout.json", "training.json"):
        (dest / name).write_text((dense / name).read_text())


if __name__ == "__main__":
    if sys.argv[1] == "composite":
        composite(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        main(sys.argv[1], Path(sys.argv[2]))
