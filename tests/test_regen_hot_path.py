"""What regenerate-responses does per conversation and per row for less CPU gives what the slower
way gave (bench/regen_loop.py measures the cost): ``core.upstream.arguments`` maps a call as
``inspect``'s binding does, and the review decoder (fixes/regenerate/regen_turns.py
``review_decoder``) writes the text transformers' ``decode`` writes."""

from __future__ import annotations

import inspect
import random
from typing import Any

import pytest
from transformers import AutoTokenizer

from speculators_qwen_compat.core.upstream import arguments
from speculators_qwen_compat.fixes.regenerate.regen_turns import review_decoder


def _both(a: Any, b: Any, *, c: Any, d: int = 4, e: Any = None) -> None: ...


def _plain(a: Any, b: int = 2, c: int = 3) -> None: ...


def _positional_only(a: Any, /, b: Any) -> None: ...


def _variadic(*args: Any, **kwargs: Any) -> None: ...


CALLS = [
    (_both, (1, 2), {"c": 3}),
    (_both, (1,), {"b": 2, "c": 3, "e": 5}),
    (_both, (), {"a": 1, "b": 2, "c": 3, "d": 9}),
    (_both, (1, 2, 3), {}),  # c is keyword-only
    (_both, (1,), {"a": 1, "b": 2, "c": 3}),  # a given twice
    (_both, (1, 2), {}),  # c missing
    (_both, (1, 2), {"c": 1, "z": 2}),  # no such parameter
    (_plain, (1,), {}),
    (_plain, (1, 2, 3), {}),
    (_plain, (), {"a": 1, "c": 5}),
    (_plain, (1, 2, 3, 4), {}),  # one too many
    (_positional_only, (1, 2), {}),
    (_variadic, (1, 2), {"x": 1}),
]


def _inspect_binding(func: Any, args: tuple, kwargs: dict) -> Any:
    try:
        bound = inspect.signature(func).bind(*args, **kwargs)
    except TypeError as exc:
        return ("TypeError", str(exc))
    bound.apply_defaults()
    return list(bound.arguments.items())


@pytest.mark.pure
@pytest.mark.parametrize(("func", "args", "kwargs"), CALLS)
def test_arguments_are_inspects_binding(func: Any, args: tuple, kwargs: dict) -> None:
    try:
        got: Any = list(arguments(func, args, kwargs).items())
    except TypeError as exc:
        got = ("TypeError", str(exc))
    assert got == _inspect_binding(func, args, kwargs)


def _upstream_decoder(tokenizer: Any) -> Any:
    """speculators' ``build_detokenizer`` decoder, as 0.8.1/0.9.0 write it."""

    def detokenize(token_ids: list[int]) -> str:
        return tokenizer.decode(token_ids, skip_special_tokens=False)

    return detokenize


def test_the_review_text_is_transformers_decode(qwen36_dir) -> None:
    tokenizer = AutoTokenizer.from_pretrained(str(qwen36_dir))
    upstream = _upstream_decoder(tokenizer)
    decoder = review_decoder(upstream)
    assert decoder is not upstream
    pick = random.Random(5)
    size = len(tokenizer)
    rows = [[pick.randrange(size) for _ in range(pick.randint(1, 900))] for _ in range(40)]
    special = tokenizer.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>"])
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "héllo 你好 🙂"}], add_generation_prompt=True
    )
    prompt = list(getattr(prompt, "input_ids", prompt))
    rows += [[], special, prompt + special, [int(tokenizer.eos_token_id or 0)]]
    for ids in rows:
        assert decoder(ids) == tokenizer.decode(ids, skip_special_tokens=False)
    # other shapes go to upstream's decoder itself (the same answer, or the same error)
    for other in ([True, 5], (5, 6), [[5, 6]]):
        assert decoder(other) == upstream(other)


def test_a_tokenizer_with_its_own_decode_keeps_upstreams_decoder(qwen36_dir) -> None:
    base = AutoTokenizer.from_pretrained(str(qwen36_dir))

    class OwnDecode(type(base)):  # type: ignore[misc]
        def decode(self, token_ids: Any, skip_special_tokens: bool = False, **kwargs: Any) -> str:
            return "own"

    tokenizer = OwnDecode.from_pretrained(str(qwen36_dir))
    upstream = _upstream_decoder(tokenizer)
    assert review_decoder(upstream) is upstream
    not_a_tokenizer = _upstream_decoder(object())
    assert review_decoder(not_a_tokenizer) is not_a_tokenizer


def test_a_decode_that_does_more_than_decode_keeps_upstreams_text(
    qwen36_dir, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transformers whose ``decode`` adds to ``_decode``'s text: the first row tells, and
    every row is then upstream's decoder's."""
    from transformers.tokenization_utils_base import PreTrainedTokenizerBase

    plain = PreTrainedTokenizerBase.decode

    def decode_and_more(self: Any, token_ids: Any, skip_special_tokens: bool = False) -> str:
        return plain(self, token_ids, skip_special_tokens=skip_special_tokens) + " (more)"

    monkeypatch.setattr(PreTrainedTokenizerBase, "decode", decode_and_more)
    tokenizer = AutoTokenizer.from_pretrained(str(qwen36_dir))
    upstream = _upstream_decoder(tokenizer)
    decoder = review_decoder(upstream)
    assert decoder is not upstream
    for ids in ([5, 6, 7], [8, 9], [10]):
        assert decoder(ids) == upstream(ids)
        assert decoder(ids).endswith(" (more)")
