"""data/segment_encoder.py gives exactly the real Qwen3.6 tokenizer's own ids.

The oracle is ``tokenizer.encode(text, add_special_tokens=False)`` of the release's transformers
on the real vocabulary (tests/qwen_vocab.py), on texts built to break piecewise tokenization:
special tokens glued to text and to each other, broken special tokens, whitespace and newlines
on both sides of a cut, characters NFC joins, CJK and emoji, pieces repeated (cache hits) and a
cache that starts over. tests/test_vllm_parity.py checks the same path against a real vLLM.
"""

from __future__ import annotations

import logging

import pytest
from qwen_vocab import vocab_dir

from speculators_qwen_compat.data import segment_encoder
from speculators_qwen_compat.data.segment_encoder import SegmentEncoder

TEXTS = [
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n",
    "<|im_start|><|im_end|><|im_start|>",
    "text<|im_start|>text<|im_end|>text",
    " <|im_start|> \n\n <|im_end|>\n\n\n",
    "<|im_start|assistant <|im_end <im_start|> |im_end|>",  # broken: not special tokens
    "<think>\n\nreasoning about 12345 and 3.14159\n</think>\n\nanswer",
    '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>',
    "cafe\u0301<|im_end|>\u0301e\u0301 \u212b",  # NFC joins e + accent, not across a special token
    "我们需要检查配置文件<|im_end|>并确认服务器的状态 🚀👩‍💻 ",
    "    indented\n\tcode()\r\n<|endoftext|>\r\n",
    "",
    "<|im_end|>",
]


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(vocab_dir()))


def test_ids_equal_the_tokenizers_own(tokenizer) -> None:
    encoder = SegmentEncoder(tokenizer)
    assert encoder.splitter is not None  # the real vocabulary takes the piecewise path
    for round_ in range(2):  # the second round is served from the cache
        for text in TEXTS:
            expected = tokenizer.encode(text, add_special_tokens=False)
            assert encoder.encode(text) == expected, (round_, text)
    assert encoder.pieces  # pieces were cached
    encoder = SegmentEncoder(tokenizer)
    encoder.to_check = 0  # right without the per-process check too, with a tiny cache
    segment_encoder.CACHE_PIECES, saved = 3, segment_encoder.CACHE_PIECES
    try:
        for text in TEXTS:
            assert encoder.encode(text) == tokenizer.encode(text, add_special_tokens=False)
        assert len(encoder.pieces) <= 3  # the cache started over instead of growing
    finally:
        segment_encoder.CACHE_PIECES = saved


def test_module_encode_keeps_one_encoder_per_tokenizer(tokenizer) -> None:
    text = TEXTS[0] * 3
    assert segment_encoder.encode(tokenizer, text) == tokenizer.encode(
        text, add_special_tokens=False
    )
    assert segment_encoder._encoders[id(tokenizer)].tokenizer is tokenizer


def test_tokenizer_with_stripping_added_token_is_encoded_whole(tokenizer) -> None:
    from tokenizers import AddedToken

    tokenizer = type(tokenizer).from_pretrained(str(vocab_dir()))
    tokenizer.add_tokens([AddedToken("<mark>", lstrip=True)])
    encoder = SegmentEncoder(tokenizer)
    assert encoder.splitter is None
    text = "a   <mark> b"
    assert encoder.encode(text) == tokenizer.encode(text, add_special_tokens=False)


def test_pieces_that_disagree_switch_to_whole_texts(tokenizer, caplog) -> None:
    encoder = SegmentEncoder(tokenizer)
    encoder.pieces[" b"] = [0]  # a wrong cached piece, as a tokenizer breaking the rule would give
    text = "a<|im_end|> b"
    with caplog.at_level(logging.WARNING, logger="speculators_qwen_compat"):
        assert encoder.encode(text) == tokenizer.encode(text, add_special_tokens=False)
    assert encoder.splitter is None
    assert "encoding whole texts" in caplog.text
