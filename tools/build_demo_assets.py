"""Rebuild the bundled demo assets: the tiny tokenizer and the two sample files.

Run with a Python that has ``tokenizers`` and ``transformers`` (any test venv):
``.venvs/0.5.0/bin/python tools/build_demo_assets.py``. The output is committed; tests and the
demo use it as it is, so they need no model hub.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from speculators_qwen_compat import demo  # noqa: E402
from speculators_qwen_compat.demo import sample_data  # noqa: E402

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED = [
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]


def corpus() -> list[str]:
    rows = list(sample_data.good_conversations(300, seed=1))
    texts = [json.dumps(row, ensure_ascii=False) for row in rows]
    texts += [demo.chat_template("qwen36")] * 3
    texts += ["assistant user system tool function parameter city unit celsius\n"] * 20
    return texts


def build_tokenizer() -> None:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1200,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(corpus(), trainer)
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=32768,
    )
    fast.chat_template = demo.chat_template("qwen36")
    fast.save_pretrained(str(demo.MODEL_DIR))


def build_samples() -> None:
    good = list(sample_data.good_conversations(60, seed=7))
    rejected = [row for _, row in sample_data.rejected_conversations()]
    openai_rows = good[:30] + rejected
    sharegpt_rows = [sample_data.to_sharegpt(row) for row in good[30:] + rejected]
    sample_data.write_jsonl(demo.OPENAI_SAMPLE, openai_rows)
    sample_data.write_jsonl(demo.SHAREGPT_SAMPLE, sharegpt_rows)


if __name__ == "__main__":
    build_tokenizer()
    build_samples()
    print(f"wrote {demo.MODEL_DIR}, {demo.OPENAI_SAMPLE}, {demo.SHAREGPT_SAMPLE}")
