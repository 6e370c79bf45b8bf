"""Conversations of the shapes users feed ``regenerate-responses``, each with what must become of
it (the oracle of tests/test_regenerate_responses.py and of bench/regen_figures.py).

Markers in a user turn tell the test server (regen_proxy.py) what the tiny target must reply:
``[call NAME]`` a qwen3_coder call of NAME, ``[long]`` a reasoning longer than any
``--max-tokens`` the tests use; anything else a short reasoning and an answer. After a tool
result the target answers.

``EXPECTED[id]``: ``("regenerated", rows)``, ``("cut", reason fragment, rows)``, ``("skipped",
reason fragment)``, ``("failed", reason fragment)``.
"""

from __future__ import annotations

import json
from typing import Any

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "weather of a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "web search",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
    },
}
WEATHER_RESULT = "sunny-in-paris"
SEARCH_RESULT = "search-found-eiffel"
EARLY_RESULT = "result-from-before-the-question"
LONG_PROMPT_WORDS = 600


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def rows() -> list[dict[str, Any]]:
    ok = [{"from": "gpt", "value": "OK."}]
    return [
        # ShareGPT with boilerplate replies
        *(
            {"id": f"sharegpt-{i}", "conversations": [{"from": "human", "value": q}, *ok]}
            for i, q in enumerate(("hello there", "tell me a joke", "what is two plus two"))
        ),
        # OpenAI messages
        {
            "id": "openai",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "name a colour"},
                {"role": "assistant", "content": "Blue."},
            ],
        },
        {
            "id": "multi-turn",
            "messages": [
                {"role": "user", "content": "first question"},
                {"role": "assistant", "content": "a"},
                {"role": "user", "content": "second question"},
                {"role": "assistant", "content": "b"},
                {"role": "user", "content": "third question"},
            ],
        },
        {
            "id": "developer",
            "messages": [
                {"role": "developer", "content": "answer in French"},
                {"role": "user", "content": "hello"},
            ],
        },
        # LLaMA-Factory function calling: function_call / observation turns, top-level tools
        {
            "id": "llamafactory",
            "conversations": [
                {"from": "human", "value": "weather in Paris? [call get_weather]"},
                {
                    "from": "function_call",
                    "value": json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}}),
                },
                {"from": "observation", "value": WEATHER_RESULT},
                {"from": "gpt", "value": "Sunny."},
            ],
            "tools": json.dumps([WEATHER["function"]]),
        },
        # OpenAI agentic trace: results paired by tool_call_id
        {
            "id": "agentic",
            "messages": [
                {"role": "user", "content": "weather? [call get_weather]"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [_call("c1", "get_weather", {"city": "Paris"})],
                },
                {"role": "tool", "tool_call_id": "c1", "content": WEATHER_RESULT},
                {"role": "assistant", "content": "Sunny."},
            ],
            "tools": [WEATHER, SEARCH],
        },
        # the data answered `search`; the target calls get_weather: no result to pair
        {
            "id": "mismatch",
            "messages": [
                {"role": "user", "content": "find it [call get_weather]"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [_call("s1", "search", {"query": "eiffel"})],
                },
                {"role": "tool", "tool_call_id": "s1", "content": SEARCH_RESULT},
                {"role": "assistant", "content": "Found."},
            ],
            "tools": [WEATHER, SEARCH],
        },
        # a tool result before the question: context, never the answer to a new call
        {
            "id": "leading-result",
            "messages": [
                {"role": "tool", "content": EARLY_RESULT},
                {"role": "user", "content": "weather? [call get_weather]"},
            ],
            "tools": [WEATHER],
        },
        # broken rows
        {"id": "no-user", "messages": [{"role": "assistant", "content": "hi"}]},
        {"id": "empty", "messages": []},
        {"id": "no-role", "messages": [{"content": "hi"}]},
        # a system message after the first turn: the template refuses the second prompt
        {
            "id": "late-system",
            "messages": [
                {"role": "user", "content": "first"},
                {"role": "assistant", "content": "a"},
                {"role": "system", "content": "late instruction"},
                {"role": "user", "content": "second"},
            ],
        },
        # a system message after the first user turn: the server and the target's own template
        # both refuse the first prompt, so the data is at fault (skipped, not failed)
        {
            "id": "system-second",
            "messages": [
                {"role": "user", "content": "first"},
                {"role": "system", "content": "late instruction"},
            ],
        },
        # thinking longer than --max-tokens: at the second step, and at the first
        {
            "id": "long-second",
            "messages": [
                {"role": "user", "content": "short one"},
                {"role": "assistant", "content": "a"},
                {"role": "user", "content": "think hard [long]"},
            ],
        },
        {"id": "long-first", "messages": [{"role": "user", "content": "think hard [long]"}]},
        # rules on the replies regeneration replaces do not skip a row (issue 33)
        {
            "id": "weight-zero",
            "messages": [
                {"role": "user", "content": "name a fruit"},
                {"role": "assistant", "content": "OK.", "weight": 0},
            ],
        },
        {
            "id": "bad-arguments",
            "messages": [
                {"role": "user", "content": "say hi"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "b1",
                            "type": "function",
                            "function": {"name": "search", "arguments": "{oops"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "b1", "content": SEARCH_RESULT},
            ],
            "tools": [SEARCH],
        },
        # messages without a user turn: upstream's --prompt-field fallback ("prompt")
        {
            "id": "prompt-fallback",
            "messages": [{"role": "system", "content": "be brief"}],
            "prompt": "name a planet",
        },
        # a prompt that alone reaches --max-tokens
        {
            "id": "long-prompt",
            "messages": [{"role": "user", "content": " ".join(["word"] * LONG_PROMPT_WORDS)}],
        },
    ]


EXPECTED: dict[str, tuple[Any, ...]] = {
    "sharegpt-0": ("regenerated", 1),
    "sharegpt-1": ("regenerated", 1),
    "sharegpt-2": ("regenerated", 1),
    "openai": ("regenerated", 1),
    "multi-turn": ("regenerated", 3),
    "developer": ("regenerated", 1),
    "llamafactory": ("regenerated", 2),
    "agentic": ("regenerated", 2),
    "mismatch": ("cut", "the target called 'get_weather'; the data has no result for it", 1),
    "leading-result": ("cut", "the target called 'get_weather'; the data has no result", 1),
    "no-user": ("skipped", "no user turn"),
    "empty": ("skipped", "conversation is empty"),
    "no-role": ("skipped", "turn without a role"),
    "late-system": ("cut", "System message must be at the beginning.", 1),
    "system-second": ("skipped", "System message must be at the beginning."),
    "long-second": ("cut", "reply still thinking at --max-tokens", 2),
    "long-first": ("cut", "reply still thinking at --max-tokens", 1),
    "weight-zero": ("regenerated", 1),
    "bad-arguments": ("regenerated", 1),
    "prompt-fallback": ("regenerated", 1),
    "long-prompt": ("cut", "prompt + reply above --max-tokens", 1),
}
#: --max-tokens of the runs: above every short prompt + reply here, below a [long] reasoning
#: and below the long prompt.
MAX_TOKENS = 400


def write(path: Any) -> None:
    with open(path, "w", encoding="utf-8") as out:
        for row in rows():
            out.write(json.dumps(row) + "\n")
