"""The pipeline tier's input: OpenAI-format conversations with tool calls (arguments as JSON
strings, as OpenAI data stores them), tool results and reasoning, and conversations about images
(by path and by ``file://`` URL, one with two images), written as JSONL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from speculators_qwen_compat.demo.sample_data import WEATHER_TOOL


def conversations(count: int = 8) -> list[dict[str, Any]]:
    """``count`` conversations; every other one calls a tool, every one carries reasoning."""
    rows: list[dict[str, Any]] = []
    cities = ["Paris", "Oslo", "Lima", "Kyoto", "Cairo", "Quito", "Perth", "Riga"]
    for i in range(count):
        city = cities[i % len(cities)]
        if i % 2 == 0:
            messages = [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": f"What is the weather in {city}? (#{i})"},
                {
                    "role": "assistant",
                    "content": "",
                    "reasoning_content": "I should call the weather tool first.",
                    "tool_calls": [
                        {
                            "id": f"call_{i}",
                            "type": "function",
                            "function": {
                                "name": "get_weather",
                                "arguments": json.dumps({"city": city}),
                            },
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": f"call_{i}", "content": '{"temp_c": 21}'},
                {
                    "role": "assistant",
                    "content": f"It is 21 degrees in {city}.",
                    "reasoning_content": "The tool answered; report it plainly.",
                },
            ]
            rows.append({"messages": messages, "tools": [WEATHER_TOOL]})
        else:
            messages = [
                {"role": "user", "content": f"Name a prime above {10 * i}. (#{i})"},
                {
                    "role": "assistant",
                    "content": f"{next_prime(10 * i)} is one.",
                    "reasoning_content": "Check divisibility by small primes.",
                },
            ]
            rows.append({"messages": messages})
    return rows


def in_blocks(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows as a corpus concatenated from sources holds them: one kind after the other
    (plain chats, then tool calls), so a map worker's shard holds rows of one kind."""
    return sorted(rows, key=lambda row: "tools" in row)


def next_prime(n: int) -> int:
    k = n + 1
    while any(k % d == 0 for d in range(2, int(k**0.5) + 1)):
        k += 1
    return k


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


#: The images of ``image_conversations``: name -> (width, height); two sizes, two pad counts.
IMAGES = {"square.png": (64, 64), "wide.png": (128, 96)}


def image_conversations(folder: Path) -> list[dict[str, Any]]:
    """Conversations about the ``IMAGES`` in ``folder`` (written by tests/programs/
    write_images.py): one by path, one by ``file://`` URL, one with both in one turn."""
    square, wide = (str(folder / name) for name in IMAGES)

    def row(parts: list[dict[str, Any]], question: str, reply: str) -> dict[str, Any]:
        user = {"role": "user", "content": [*parts, {"type": "text", "text": question}]}
        return {"messages": [user, {"role": "assistant", "content": reply}]}

    return [
        row([{"type": "image", "path": square}], "What colour is this?", "Mostly green."),
        row([{"type": "image", "url": f"file://{wide}"}], "Describe it.", "A wide green box."),
        row(
            [{"type": "image", "path": square}, {"type": "image", "path": wide}],
            "Which is wider?",
            "The second one.",
        ),
    ]
