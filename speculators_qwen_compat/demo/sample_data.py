"""Sample conversations for the demo, the tests and the benchmarks, in both formats.

``good_conversations`` yields the kinds agentic training sets hold (multi-turn, reasoning, tool
calls, text parts, non-ASCII); ``rejected_conversations`` rows a strict Qwen3.6-style template
refuses, each with its skip reason; ``to_sharegpt``/``from_sharegpt`` convert.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            "required": ["city"],
        },
    },
}

TOPICS = [
    ("the capital of France", "Paris is the capital of France."),
    ("a prime above 100", "101 is the smallest prime above 100."),
    ("how to reverse a list in Python", "Use `items[::-1]` or `items.reverse()`."),
    ("why the sky is blue", "Rayleigh scattering favours short wavelengths."),
    ("café culture in Zürich", "Zürich cafés open early; order a café crème."),
    ("写一句关于春天的诗", "春风又绿江南岸，明月何时照我还。"),
    ("مرحبا، كيف حالك؟", "أنا بخير، شكرا لسؤالك!"),
    ("an emoji summary of a good day", "☀️🥐📚🚲🌙 — sun, breakfast, reading, a ride, rest."),
]

REASONS = [
    "The user asks a factual question; answer briefly.",
    "Check the arithmetic twice before answering.",
    "考虑用户的语言，用同样的语言回答。",
]

REJECTED_REASONS = {
    "no_user": "No user query found in messages.",
    "tool_only_user": "No user query found in messages.",
    "late_system": "System message must be at the beginning.",
    "numeric_content": "content is neither text nor a list of parts (int)",
}


def good_conversations(count: int, seed: int = 0) -> Iterator[dict[str, Any]]:
    """Rows ``{"messages": [...], optional "tools": [...]}`` in OpenAI form."""
    rng = random.Random(seed)
    builders = [_single_turn, _multi_turn, _with_system, _with_reasoning, _with_tool_call, _parts]
    for index in range(count):
        yield builders[index % len(builders)](rng, index)


def rejected_conversations() -> Iterator[tuple[str, dict[str, Any]]]:
    """``(kind, row)`` pairs that the strict template rejects; REJECTED_REASONS[kind] is why."""
    yield (
        "no_user",
        {
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "assistant", "content": "Hello."},
            ]
        },
    )
    yield (
        "tool_only_user",
        {
            "messages": [
                {"role": "user", "content": "<tool_response>\n42\n</tool_response>"},
                {"role": "assistant", "content": "The tool said 42."},
            ]
        },
    )
    yield (
        "late_system",
        {
            "messages": [
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello!"},
                {"role": "system", "content": "Be formal from now on."},
                {"role": "user", "content": "How are you?"},
                {"role": "assistant", "content": "Very well, thank you."},
            ]
        },
    )
    yield (
        "numeric_content",
        {
            "messages": [
                {"role": "user", "content": 42},
                {"role": "assistant", "content": "That is a number."},
            ]
        },
    )


#: OpenAI role -> ShareGPT ``from``
SHAREGPT_NAMES = {"user": "human", "assistant": "gpt", "system": "system", "tool": "tool"}


def to_sharegpt(row: dict[str, Any]) -> dict[str, Any]:
    """The same conversation as ShareGPT ``conversations`` with ``from``/``value`` turns."""
    return _renamed(row["messages"], "role", "content", SHAREGPT_NAMES, "from", "value", row)


def from_sharegpt(row: dict[str, Any]) -> dict[str, Any]:
    """``to_sharegpt``'s inverse, kept under ``conversations``: OpenAI ``role``/``content``
    turns (tool-call arguments stay JSON strings), ``tools`` beside them."""
    roles = {name: role for role, name in SHAREGPT_NAMES.items()}
    return _renamed(row["conversations"], "from", "value", roles, "role", "content", row)


def _renamed(
    turns: list[dict[str, Any]], who: str, what: str, names: dict[str, str], new_who: str,
    new_what: str, row: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    out = []
    for turn in turns:
        renamed = {new_who: names[turn[who]], new_what: turn.get(what)}
        renamed.update({k: v for k, v in turn.items() if k not in (who, what)})
        out.append(renamed)
    converted: dict[str, Any] = {"conversations": out}
    if "tools" in row:
        converted["tools"] = row["tools"]
    return converted


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def _topic(rng: random.Random) -> tuple[str, str]:
    return rng.choice(TOPICS)


def _single_turn(rng: random.Random, index: int) -> dict[str, Any]:
    question, answer = _topic(rng)
    return {
        "messages": [
            {"role": "user", "content": f"Tell me about {question} (#{index})."},
            {"role": "assistant", "content": answer},
        ]
    }


def _multi_turn(rng: random.Random, index: int) -> dict[str, Any]:
    (q1, a1), (q2, a2) = _topic(rng), _topic(rng)
    return {
        "messages": [
            {"role": "user", "content": f"First: {q1}?"},
            {"role": "assistant", "content": a1},
            {"role": "user", "content": f"And {q2}? (#{index})"},
            {"role": "assistant", "content": a2},
        ]
    }


def _with_system(rng: random.Random, index: int) -> dict[str, Any]:
    question, answer = _topic(rng)
    return {
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": f"{question}? #{index}"},
            {"role": "assistant", "content": answer},
        ]
    }


def _with_reasoning(rng: random.Random, index: int) -> dict[str, Any]:
    (q1, a1), (q2, a2) = _topic(rng), _topic(rng)
    return {
        "messages": [
            {"role": "user", "content": f"{q1}? #{index}"},
            {"role": "assistant", "content": a1, "reasoning_content": rng.choice(REASONS)},
            {"role": "user", "content": f"{q2}?"},
            {"role": "assistant", "content": a2, "reasoning_content": rng.choice(REASONS)},
        ]
    }


def _with_tool_call(rng: random.Random, index: int) -> dict[str, Any]:
    city = rng.choice(["Paris", "Zürich", "東京", "Lagos"])
    arguments = json.dumps({"city": city, "unit": "celsius"}, ensure_ascii=False)
    return {
        "tools": [WEATHER_TOOL],
        "messages": [
            {"role": "user", "content": f"What is the weather in {city}? #{index}"},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "I should call the tool.",
                "tool_calls": [
                    {
                        "id": f"call_{index}",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": arguments},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": f"call_{index}",
                "content": json.dumps({"temperature": rng.randint(-5, 35)}),
            },
            {"role": "assistant", "content": f"It is mild in {city} today."},
        ],
    }


def _parts(rng: random.Random, index: int) -> dict[str, Any]:
    question, answer = _topic(rng)
    return {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": f"Part one of #{index}. "},
                    {"type": "text", "text": f"{question}?"},
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": answer}]},
        ]
    }
