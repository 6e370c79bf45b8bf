"""The mask oracle catches wrong output: a flipped bit at a span edge (the token straddling the
generation prompt's end included), a lost, extra or foreign row, an altered or dropped string.

Correct output is built here the way upstream builds it, with transformers alone (the template
rendered, then tokenized; <= 0.7: upstream's regex over the text, a token supervised when its
offsets overlap the assistant text; 0.8+: token-prefix boundaries between prompt and full
renders), on the tiny tokenizer (the straddling case on the real vocabulary); no prepare_data
run, a few seconds per release.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from mask_oracle import Oracle
from qwen_vocab import copy_vocab

from speculators_qwen_compat import demo

ROWS: list[dict[str, Any]] = [
    {
        "messages": [
            {"role": "user", "content": "Hi there"},
            {"role": "assistant", "content": "Hello, friend."},
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "It is 4.", "reasoning_content": "Add two and two."},
        ]
    },
    {
        "conversations": [
            {"from": "system", "value": "Be brief."},
            {"from": "human", "value": "Name a colour."},
            {"from": "gpt", "value": "Blue."},
        ]
    },
]
#: The same rows as the template receives them.
CHATS = [
    ROWS[0]["messages"],
    [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
    ],
]
SPAN = re.compile(r"<\|im_start\|>assistant\n(.*?)<\|im_end\|>", re.DOTALL)


def _regex_rows(tokenizer: Any) -> list[dict[str, list[int]]]:
    rows = []
    for chat in CHATS:
        text = tokenizer.apply_chat_template(chat, tokenize=False)
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        spans = [m.span(1) for m in SPAN.finditer(text)]
        mask = [int(any(s < e2 and s2 < e for s2, e2 in spans)) for s, e in enc["offset_mapping"]]
        rows.append({"input_ids": enc["input_ids"], "loss_mask": mask})
    return rows


def _boundary_rows(tokenizer: Any) -> list[dict[str, list[int]]]:
    def ids(chat: list[dict[str, Any]], prompt: bool) -> list[int]:
        text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=prompt)
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    rows = []
    for chat in CHATS:
        for j, turn in enumerate(chat):
            if turn["role"] != "assistant" or j == 0:
                continue
            prompt, full = ids(chat[:j], True), ids(chat[: j + 1], False)
            b = 0
            while b < min(len(prompt), len(full)) and prompt[b] == full[b]:
                b += 1
            rows.append({"input_ids": full, "loss_mask": [0] * b + [1] * (len(full) - b)})
    return rows


@pytest.fixture(scope="module", params=[False, True], ids=["regex", "boundary"])
def case(request: pytest.FixtureRequest, qwen36_dir: Path) -> tuple[Oracle, list[dict]]:
    oracle = Oracle(qwen36_dir, renders=request.param)
    build = _boundary_rows if request.param else _regex_rows
    return oracle, build(oracle.tokenizer)


def _copy(rows: list[dict]) -> list[dict]:
    return [{k: list(v) for k, v in row.items()} for row in rows]


def test_correct_output_passes(case: tuple[Oracle, list[dict]]) -> None:
    oracle, rows = case
    oracle.check(rows, ROWS)


def test_each_edge_bit_is_checked(case: tuple[Oracle, list[dict]]) -> None:
    oracle, rows = case
    for r, row in enumerate(rows):
        mask = row["loss_mask"]
        edges = [i for i in range(1, len(mask)) if mask[i] != mask[i - 1]]
        assert edges
        for edge in edges:
            for i in (edge - 1, edge):
                bad = _copy(rows)
                bad[r]["loss_mask"][i] ^= 1
                with pytest.raises(AssertionError, match="wrong mask bit"):
                    oracle.check(bad, ROWS)


def test_straddling_token_after_the_generation_prompt(tmp_path: Path) -> None:
    """Qwen3.6's generation prompt ends in ``<think>\\n``; a turn without reasoning renders
    ``<think>\\n\\n</think>``, whose ``\\n\\n`` token (one token in the real vocabulary)
    straddles the prompt's end: upstream's token-prefix boundary supervises it."""
    model = copy_vocab(tmp_path)
    (model / "chat_template.jinja").write_text(demo.chat_template("qwen36"), encoding="utf-8")
    oracle = Oracle(model, renders=True)
    assert oracle.generation_prompt == "<think>\n"
    rows = _boundary_rows(oracle.tokenizer)
    first = rows[0]["loss_mask"].index(1)
    assert oracle.tokenizer.decode(rows[0]["input_ids"][first]) == "\n\n"
    rows[0]["loss_mask"][first] = 0
    with pytest.raises(AssertionError, match="wrong mask bit"):
        oracle.check(rows, ROWS)


def test_lost_extra_and_foreign_rows(case: tuple[Oracle, list[dict]]) -> None:
    oracle, rows = case
    with pytest.raises(AssertionError, match="missing"):
        oracle.check(rows[:-1], ROWS)
    with pytest.raises(AssertionError, match="match no good conversation"):
        oracle.check(rows + rows[-1:], ROWS)
    with pytest.raises(AssertionError, match="match no good conversation"):
        oracle.check(rows, ROWS[:1])


def test_strings_as_written(case: tuple[Oracle, list[dict]]) -> None:
    oracle, rows = case
    changed = [
        {"messages": [*ROWS[0]["messages"][:3], {**ROWS[0]["messages"][3], "content": "It's 4."}]},
        ROWS[1],
    ]
    with pytest.raises(AssertionError, match="match no good conversation"):
        oracle.check(rows, changed)
    reasoning_elsewhere = [
        {"messages": [*ROWS[0]["messages"][:3], {**ROWS[0]["messages"][3], "thinking": "Sum."}]},
        ROWS[1],
    ]
    reasoning_elsewhere[0]["messages"][3].pop("reasoning_content")
    with pytest.raises(AssertionError, match="match no good conversation"):
        oracle.check(rows, reasoning_elsewhere)
