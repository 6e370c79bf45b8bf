"""The normaliser on its own: both formats, mixes, parts, reasoning, tool calls, roles."""

from __future__ import annotations

import json

import pytest

from speculators_qwen_compat.core.run_options import RUN_ENV, RunOptions
from speculators_qwen_compat.data.normalize.normalize import (
    BadConversation,
    normalize_conversation,
    normalize_row,
    pick_conversation,
)

pytestmark = pytest.mark.pure  # release-independent: run once (tools/matrix.py)


def test_sharegpt_and_openai_give_the_same_turns() -> None:
    sharegpt = [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]
    openai = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    assert (
        normalize_conversation(sharegpt)
        == normalize_conversation(openai)
        == [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "yo"},
        ]
    )


def test_arrow_unified_turns_use_whichever_keys_are_set() -> None:
    turns = [
        {"from": None, "value": None, "role": "user", "content": "hi"},
        {"from": "gpt", "value": "yo", "role": None, "content": None},
    ]
    assert [t["role"] for t in normalize_conversation(turns)] == ["user", "assistant"]


def test_role_table() -> None:
    roles = ["developer", "human", "function_call", "observation", "function", "ipython", "model"]
    turns = [{"role": r, "content": "{}" if r == "function_call" else "x"} for r in roles]
    turns[2] = {"from": "function_call", "value": '{"name": "f", "arguments": {"a": 1}}'}
    got = [t["role"] for t in normalize_conversation(turns)]
    assert got == ["system", "user", "assistant", "tool", "tool", "tool", "assistant"]


@pytest.mark.parametrize(
    ("policy", "roles", "how"),
    [("assistant", ["user", "assistant"], "treated as assistant"), ("drop", ["user"], "dropped")],
)
def test_unknown_roles_chosen_by_flag(
    monkeypatch: pytest.MonkeyPatch, policy: str, roles: list[str], how: str
) -> None:
    """``--unknown-roles assistant|drop``: whatever the installed release does (its own
    behaviour, the default, is tested per release in test_data_units.py); the row is kept and
    the event counted; ``skip`` refuses the conversation."""
    monkeypatch.setenv(RUN_ENV, RunOptions(unknown_roles=policy).to_json())
    row = {"messages": [{"role": "user", "content": "hi"}, {"role": "Qwen3-32B", "content": "x"}]}
    got = normalize_row(row)
    assert [t["role"] for t in got.conversation] == roles
    assert got.notes == [f"turns with role 'Qwen3-32B' {how} (--unknown-roles {policy})"]
    monkeypatch.setenv(RUN_ENV, RunOptions(unknown_roles="skip").to_json())
    with pytest.raises(BadConversation, match="unknown role 'narrator'"):
        normalize_conversation([{"role": "narrator", "content": "x"}])


@pytest.mark.parametrize(
    ("release_roles", "roles", "how"),
    [("assistant", ["user", "assistant"], "treated as assistant"), ("drop", ["user"], "dropped")],
)
def test_unknown_roles_as_the_release_takes_them(
    release_roles: str, roles: list[str], how: str
) -> None:
    """Without the flag, as the release does (the fix reads it from upstream's shape: 0.8+
    assistant, <= 0.7 drop), whichever release is installed."""
    row = {"messages": [{"role": "user", "content": "hi"}, {"role": "Qwen3-32B", "content": "x"}]}
    got = normalize_row(row, release_roles=release_roles)
    assert [t["role"] for t in got.conversation] == roles
    assert got.notes[0].startswith(f"turns with role 'Qwen3-32B' {how}, as speculators ")


def test_reasoning_reaches_both_keys() -> None:
    (turn,) = normalize_conversation([{"role": "assistant", "content": "a", "thinking": "t"}])
    assert turn["reasoning_content"] == turn["thinking"] == "t"


def test_tool_calls_pass_through_unchanged() -> None:
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": [1]}'}},
        {"function": {"name": "g", "arguments": {"y": 2}}},
        {"function": {"name": "h"}},
    ]
    given = json.loads(json.dumps(calls))
    (turn,) = normalize_conversation([{"role": "assistant", "content": "", "tool_calls": calls}])
    assert turn["tool_calls"] == given and calls == given


def test_function_call_turn_becomes_one_openai_call() -> None:
    turns = [{"from": "function_call", "value": '{"name": "f", "arguments": "{\\"a\\": 1}"}'}]
    (turn,) = normalize_conversation(turns)
    assert turn["tool_calls"] == [
        {"type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    ]


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [("{not json", "not valid JSON"), ("[1, 2]", "not a JSON object")],
)
def test_bad_tool_call_arguments_are_reasons(arguments: str, reason: str) -> None:
    call = {"function": {"name": "f", "arguments": arguments}}
    with pytest.raises(BadConversation, match=reason):
        normalize_conversation([{"role": "assistant", "content": "", "tool_calls": [call]}])


def test_text_parts_are_kept_as_text_parts() -> None:
    (turn,) = normalize_conversation(
        [{"role": "user", "content": ["a", {"type": "text", "text": "b", "image": None}]}]
    )
    assert turn["content"] == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]


@pytest.mark.parametrize(
    ("conv", "reason"),
    [
        ([], "empty or not a list"),
        ({"role": "user"}, "empty or not a list"),
        (["text"], "turn is not a mapping"),
        ([{"content": "x"}], "turn without a role"),
        ([{"role": "user", "content": 7}], r"neither text nor a list of parts \(int\)"),
        ('[{"role": "user"', "not JSON"),
    ],
)
def test_unusable_conversations_raise_their_reason(conv: object, reason: str) -> None:
    with pytest.raises(BadConversation, match=reason):
        normalize_conversation(conv)


def test_normalising_twice_changes_nothing() -> None:
    call = {"function": {"name": "f", "arguments": '{"x": 1}'}}
    conv = [
        {"from": "developer", "value": "sys"},
        {"from": "human", "value": "q"},
        {"from": "gpt", "value": "", "tool_calls": [call], "reasoning": "r"},
        {"from": "observation", "value": "1", "tool_call_id": "c"},
    ]
    once = normalize_conversation(conv)
    assert normalize_conversation(once) == once


def test_pick_conversation_prefers_the_named_column() -> None:
    row = {"conversations": None, "messages": [1], "chat": [2]}
    assert pick_conversation(row) == [1]
    assert pick_conversation(row, "chat") == [2]
    with pytest.raises(BadConversation, match="no 'other' column"):
        pick_conversation(row, "other")
