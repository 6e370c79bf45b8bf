"""The real Qwen3.5/3.6 vocabulary built by ``make vocab`` loads in this release's transformers
and encodes the known samples (ids as Qwen's own tokenizer gives them)."""

from __future__ import annotations

from qwen_vocab import vocab_dir
from transformers import AutoTokenizer


def test_real_vocabulary_samples() -> None:
    tok = AutoTokenizer.from_pretrained(str(vocab_dir()))
    assert len(tok) == 248_077
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    encode = lambda text: tok.encode(text, add_special_tokens=False)  # noqa: E731
    assert encode("<|im_start|>user\nHello 你好<|im_end|>\n") == [
        248045, 846, 198, 9419, 220, 109266, 248046, 198,
    ]  # fmt: skip
    assert encode("<think>\n\n</think>\n\n") == [248068, 271, 248069, 271]
    assert tok.convert_tokens_to_ids(["<tool_call>", "<tool_response>", "<|video_pad|>"]) == [
        248058, 248066, 248057,
    ]  # fmt: skip
    # NFC: a decomposed accent encodes as the composed one.
    assert encode("cafe\u0301") == encode("café")
