"""A corpus of awkward and broken training rows, each with what prepare_data must do with it.

``CORPUS`` maps a kind to ``(conversation, reason)``: reason None means the row is good and must
be kept with the right mask; otherwise it is the skip reason the report must count. Each
conversation is written in OpenAI form; ``as_sharegpt`` gives the ShareGPT form of the same row.
"""

from __future__ import annotations

import json
from typing import Any

from speculators_qwen_compat.data.normalize.processor_media import NEEDS_PROCESSOR
from speculators_qwen_compat.demo.sample_data import WEATHER_TOOL

NO_QUERY = "No user query found in messages."
LATE_SYSTEM = "System message must be at the beginning."
NOTHING = "nothing to supervise (no assistant turn after a user turn, or none inside --seq-length)"
NOT_A_LIST = "conversation is empty or not a list"


def _u(text: Any) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _a(text: Any, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": text, **extra}


def _call(arguments: Any) -> dict[str, Any]:
    return {"id": "c1", "type": "function", "function": {"name": "get_weather",
                                                         "arguments": arguments}}  # fmt: skip


LONG = " ".join(f"word{i}" for i in range(1500))


def corpus(renders: bool) -> dict[str, tuple[dict[str, Any], str | None]]:
    """kind -> (row, reason or None). ``renders``: speculators 0.8+ semantics."""
    tool_turns = [
        _u("Weather in Paris?"),
        _a("", tool_calls=[_call('{"city": "Paris"}')]),
        {"role": "tool", "tool_call_id": "c1", "content": '{"t": 21}'},
        _a("21 degrees."),
    ]
    rows: dict[str, tuple[list[Any] | Any, str | None, dict[str, Any]]] = {
        # good rows
        "single_turn": ([_u("hi"), _a("hello")], None, {}),
        "system_multi_turn": (
            [{"role": "system", "content": "Be brief."}, _u("a?"), _a("A."), _u("b?"), _a("B.")],
            None,
            {},
        ),
        "reasoning_content": ([_u("2+2?"), _a("4", reasoning_content="add")], None, {}),
        "thinking_key": ([_u("3+3?"), _a("6", thinking="add again")], None, {}),
        "reasoning_key": ([_u("4+4?"), _a("8", reasoning="add twice")], None, {}),
        "tool_call_json_string_args": (tool_turns, None, {"tools": [WEATHER_TOOL]}),
        "tool_call_mapping_args": (
            [
                tool_turns[0],
                _a("", tool_calls=[_call({"city": "Oslo"})]),
                tool_turns[2],
                tool_turns[3],
            ],
            None,
            {},
        ),
        "null_content_with_tool_calls": (
            [tool_turns[0], _a(None, tool_calls=[_call("{}")]), tool_turns[2], tool_turns[3]],
            None,
            {},
        ),
        "text_parts": (
            [_u([{"type": "text", "text": "part "}, "two"]), _a([{"type": "text", "text": "ok"}])],
            None,
            {},
        ),
        # the demo model is a tokenizer: <= 0.7 skip image rows (one pad, no pixels;
        # data/normalize/processor_media.py); 0.8+ render as vLLM, which refuses images for a
        # text-only target
        "image_by_path": (
            [
                _u([{"type": "image", "path": "cat.png"}, {"type": "text", "text": "what is it?"}]),
                _a("A cat."),
            ],
            "the target has no image processor (a text-only checkpoint)"
            if renders
            else NEEDS_PROCESSOR,
            {},
        ),
        "chinese": ([_u("春天的诗？"), _a("春风又绿江南岸。")], None, {}),
        "right_to_left": ([_u("שלום, מה שלומך?"), _a("مرحبا بك!")], None, {}),
        "emoji": ([_u("🌧️ or ☀️?"), _a("☀️🎉")], None, {}),
        "nul_character": ([_u("a\u0000b"), _a("c\u0000d")], None, {}),
        "crlf_text": ([_u("line one\r\nline two"), _a("ok\r\nfine")], None, {}),
        "trailing_user_turn": ([_u("q1"), _a("a1"), _u("and then?")], None, {}),
        "extra_keys_everywhere": (
            [{**_u("hi"), "weight": 1, "lang": "en"}, {**_a("yo"), "score": 0.5, "meta": {"x": 1}}],
            None,
            {"source": "scrape", "id": 7},
        ),
        "missing_content_key": ([{"role": "user"}, _a("Nothing was asked.")], None, {}),
        "developer_role": (
            [{"role": "developer", "content": "Be kind."}, _u("hi"), _a("hey")],
            None,
            {},
        ),
        "function_and_observation_roles": (
            [
                _u("weather?"),
                {"role": "function_call", "content": '{"name": "w", "arguments": {"c": 1}}'},
                {"role": "observation", "content": "sunny"},
                _a("Sunny."),
            ],
            None,
            {},
        ),
        "mixed_key_styles": ([{"from": "human", "value": "hi"}, _a("hello")], None, {}),
        # rows to skip, with the reason
        "no_user_turn": ([{"role": "system", "content": "s"}, _a("hello")], NO_QUERY, {}),
        "tool_response_only_user": (
            [_u("<tool_response>\n1\n</tool_response>"), _a("one")],
            NO_QUERY,
            {},
        ),
        "late_system": (
            [_u("hi"), _a("yo"), {"role": "system", "content": "late"}, _u("q"), _a("a")],
            LATE_SYSTEM,
            {},
        ),
        "two_system_messages": (
            [
                {"role": "system", "content": "a"},
                {"role": "system", "content": "b"},
                _u("q"),
                _a("x"),
            ],
            LATE_SYSTEM,
            {},
        ),
        "empty_conversation": ([], NOT_A_LIST, {}),
        "null_conversation": (None, "conversation is null", {}),
        "mapping_conversation": ({"role": "user", "content": "hi"}, NOT_A_LIST, {}),
        "turn_not_a_mapping": ([_u("hi"), "assistant: hello"], "turn is not a mapping (str)", {}),
        "missing_role": ([{"content": "hi"}, _a("yo")], "turn without a role", {}),
        "numeric_content": (
            [_u(42), _a("forty-two")],
            "content is neither text nor a list of parts (int)",
            {},
        ),
        "mapping_content": (
            [_u({"text": "hi"}), _a("yo")],
            "content is neither text nor a list of parts (dict)",
            {},
        ),
        # written to the run's media folder (data/normalize/inline_media.py), then as image_by_path
        "inline_base64_image": (
            [_u([{"type": "image", "base64": "iVBORw0KGgo="}]), _a("?")],
            "the target has no image processor (a text-only checkpoint)"
            if renders
            else NEEDS_PROCESSOR,
            {},
        ),
        "assistant_only": ([_a("unprompted")], NOTHING if renders else NO_QUERY, {}),
        "user_only": ([_u("anyone?")], NOTHING, {}),
        # roles outside the table follow the release: dropped <= 0.7, assistant 0.8+ (issue 14)
        "unknown_role": (
            [_u("hi"), {"role": "narrator", "content": "meanwhile"}, _a("yo")],
            None,
            {},
        ),
        "vendor_role": (
            [_u("hi"), {"role": "claude-3", "content": "hello"}],
            None if renders else NOTHING,
            {},
        ),
        "far_beyond_seq_length": ([_u(LONG), _a("short answer")], NOTHING, {}),
        "tool_arguments_not_json": (
            [_u("w?"), _a("", tool_calls=[_call("{city: Paris")])],
            "tool call arguments are not valid JSON",
            {},
        ),
    }
    return {kind: ({"messages": conv, **extra}, reason) for kind, (conv, reason, extra) in
            rows.items()}  # fmt: skip


def as_sharegpt(row: dict[str, Any]) -> dict[str, Any]:
    """The same row in ShareGPT form: ``conversations`` of ``from``/``value`` turns."""
    names = {"user": "human", "assistant": "gpt"}
    conv = row["messages"]
    if isinstance(conv, list):
        conv = [_sharegpt_turn(turn, names) for turn in conv]
    out = {k: v for k, v in row.items() if k != "messages"}
    return {"conversations": conv, **out}


def _sharegpt_turn(turn: Any, names: dict[str, str]) -> Any:
    if not isinstance(turn, dict) or "role" not in turn:
        return turn
    out = {"from": names.get(turn["role"], turn["role"])}
    if "content" in turn:
        out["value"] = turn["content"]
    out.update({k: v for k, v in turn.items() if k not in ("role", "content")})
    return out


def jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
