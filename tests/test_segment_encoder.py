"""data/render/segment_encoder.py gives exactly the real Qwen3.6 tokenizer's own ids.

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

from speculators_qwen_compat.data.render import segment_encoder
from speculators_qwen_compat.data.render.segment_encoder import SegmentEncoder

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
    segment_encoder.CACHE_BYTES, saved = 1024, segment_encoder.CACHE_BYTES
    try:
        for text in TEXTS:
            assert encoder.encode(text) == tokenizer.encode(text, add_special_tokens=False)
        assert 0 < encoder.held <= 1024  # the cache started over instead of growing
    finally:
        segment_encoder.CACHE_BYTES = saved


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


def _long_turn(index: int, tokens: int = 50_000) -> str:
    """A conversation piece with one turn of about ``tokens`` tokens (a long tool output or
    reasoning), different for each ``index``."""
    words = " ".join(f"row{index}col{i % 97}={i * 7919 % 100_003}" for i in range(tokens // 6))
    return f"<|im_start|>tool\n{words}<|im_end|>\n<|im_start|>assistant\nok<|im_end|>\n"


# once, on the newest release: the byte budget is our cache's, whichever tokenizer fills it
@pytest.mark.pure
def test_the_cache_is_bounded_by_size_on_long_turns(tokenizer) -> None:
    """Peak memory stays flat: after many distinct 50,000-token turns the cache holds at most
    its byte budget (here 4 MB; each turn is ~0.5 MB of text and ids), measured with
    tracemalloc, while every id stays the tokenizer's own."""
    import tracemalloc

    segment_encoder.CACHE_BYTES, saved = 4 << 20, segment_encoder.CACHE_BYTES
    try:
        encoder = SegmentEncoder(tokenizer)
        first = _long_turn(0)
        assert encoder.encode(first) == tokenizer.encode(first, add_special_tokens=False)
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        held = []
        for index in range(1, 25):
            text = _long_turn(index)
            assert len(encoder.encode(text)) > 40_000
            del text
            held.append(tracemalloc.get_traced_memory()[0] - base)
        tracemalloc.stop()
    finally:
        segment_encoder.CACHE_BYTES = saved
    assert encoder.held <= 4 << 20
    # ~12 MB of distinct turns went through; memory held stays under budget plus slack
    assert max(held) < 6 << 20, [h >> 20 for h in held]
    assert max(held[12:]) < max(held[:12]) + (1 << 20)  # flat: the second half does not grow


CONVERSATION = (
    "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nList the files.<|im_end|>\n"
    "<|im_start|>assistant\n<think>\nls first\n</think>\n\n<tool_call>\n"
    '{"name": "ls", "arguments": {"path": "."}}\n</tool_call><|im_end|>\n'
    "<|im_start|>user\n<tool_response>\na.py b.py\n</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\na.py and b.py<|im_end|>\n"
)


def _renders_of_one_conversation() -> list[str]:
    """Texts in the order upstream asks for them: each prefix, its generation prompt, then a
    changed history (earlier reasoning dropped, as Qwen3.6 does after a new user message), cut
    at every character so the shared part ends everywhere: inside an added token, right after
    one, in the middle of a piece."""
    texts = []
    for end in range(0, len(CONVERSATION) + 1, 7):
        texts += [CONVERSATION[:end], CONVERSATION[:end] + "<|im_start|>assistant\n<think>\n"]
    dropped = CONVERSATION.replace("<think>\nls first\n</think>\n\n", "")
    texts += [dropped[:end] for end in range(len(dropped), 0, -5)]
    texts += [CONVERSATION[:end] + "<|im_e" for end in range(len(CONVERSATION))]
    return texts


def test_reusing_the_previous_texts_ids_gives_the_tokenizers_own(tokenizer) -> None:
    encoder = SegmentEncoder(tokenizer)
    encoder.to_check = 0  # the answers below are the oracle's, not the per-process check's
    for text in _renders_of_one_conversation():
        assert encoder.encode(text) == tokenizer.encode(text, add_special_tokens=False), text


def test_a_longer_added_token_that_starts_in_the_shared_part_is_rematched(tokenizer) -> None:
    """An added token that extends past where the two texts differ: the ids before it cannot
    be reused up to the shorter token's end (the tokenizer matches the longest at a position)."""
    from tokenizers import AddedToken

    tokenizer = type(tokenizer).from_pretrained(str(vocab_dir()))
    tokenizer.add_tokens([AddedToken("<|im_end|>\n<|im_start|>assistant", normalized=False)])
    encoder = SegmentEncoder(tokenizer)
    encoder.to_check = 0
    first = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>user\nagain<|im_end|>\n"
    second = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n"
    for text in (first, second, first, second[:40], second):
        assert encoder.encode(text) == tokenizer.encode(text, add_special_tokens=False), text


def test_an_extended_text_reuses_the_previous_ids(tokenizer) -> None:
    """The point of the reuse: a render that extends the previous one looks up only its last
    few pieces (the system prompt, the tool call and the tool output are not looked up again)."""
    encoder = SegmentEncoder(tokenizer)
    encoder.encode(CONVERSATION)
    looked_up = []
    pieces = encoder.pieces
    encoder.pieces = type("Spy", (dict,), {"get": lambda self, k: looked_up.append(k)})(pieces)
    extended = CONVERSATION + "<|im_start|>user\nthanks<|im_end|>\n"
    assert encoder.encode(extended) == tokenizer.encode(extended, add_special_tokens=False)
    # the last reply's piece too: the final <|im_end|> sits closer to the end of the shared
    # text than the vocabulary's longest added token is long
    assert looked_up == ["\n\na.py and b.py", "\n", "user\nthanks", "\n"], looked_up
