"""The conversations the bench's tiny verifiers learn: structure a small model can learn and a
drafter can predict, in chat form (issue 52, item 1).

Kinds, each a template with slots drawn from small lists: a greeting that repeats the user's
name over two turns, counting from one number to another, one-digit sums, a tool call and the
reply to the tool's answer (Qwen's XML tool-call form; no ``tools`` schema: its ~140 tokens
of fixed system text would cost a third of the training time and teach nothing),
a function written from a name and a number, and repeating words back. A seed gives the same
conversations on every machine; the train and held-out sets are drawn with different seeds.
Each conversation is OpenAI ``messages`` (and ``tools``), rendered by the model's own chat
template where it is used.
"""

from __future__ import annotations

import random
from typing import Any

NAMES = ["Ana", "Ben", "Chloe", "Dev", "Emil", "Farah", "Gus", "Hana", "Ivo", "June", "Kai",
         "Lena", "Milo", "Nora", "Omar", "Pia", "Quinn", "Rosa", "Sam", "Tara"]  # fmt: skip
CITIES = ["Paris", "Lima", "Oslo", "Rome", "Cairo", "Tokyo", "Quito", "Delhi", "Bern", "Seoul"]
WORDS = ["red", "blue", "green", "cat", "dog", "tree", "river", "stone", "cloud", "bread",
         "apple", "moon", "sun", "book", "door", "chair"]  # fmt: skip


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def greeting(rng: random.Random) -> dict[str, Any]:
    name = rng.choice(NAMES)
    return {"messages": [
        _user(f"My name is {name}. Greet me."),
        _assistant(f"Hello, {name}! Nice to meet you, {name}."),
        _user("What is my name?"),
        _assistant(f"Your name is {name}."),
    ]}  # fmt: skip


def counting(rng: random.Random) -> dict[str, Any]:
    start = rng.randint(0, 30)
    end = start + rng.randint(3, 8)
    numbers = ", ".join(str(n) for n in range(start, end + 1))
    return {"messages": [_user(f"Count from {start} to {end}."), _assistant(f"{numbers}.")]}


def sums(rng: random.Random) -> dict[str, Any]:
    a, b = rng.randint(0, 9), rng.randint(0, 9)
    return {"messages": [_user(f"What is {a} + {b}?"), _assistant(f"{a} + {b} = {a + b}.")]}


def tool_call(rng: random.Random) -> dict[str, Any]:
    city, degrees = rng.choice(CITIES), rng.randint(10, 30)
    call = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": city}}}
    return {
        "messages": [
            _user(f"What is the weather in {city}?"),
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "content": f'{{"city": "{city}", "degrees": {degrees}}}'},
            _assistant(f"It is {degrees} degrees in {city}."),
        ]
    }


def code(rng: random.Random) -> dict[str, Any]:
    word, number = rng.choice(WORDS), rng.randint(1, 9)
    body = f"def add_{word}(x):\n    return x + {number}"
    return {"messages": [
        _user(f"Write a function add_{word} that adds {number}."),
        _assistant(f"```python\n{body}\n```"),
    ]}  # fmt: skip


def repeat(rng: random.Random) -> dict[str, Any]:
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 6)))
    return {"messages": [_user(f"Repeat after me: {words}"), _assistant(f"{words}")]}


KINDS = (greeting, counting, sums, tool_call, code, repeat)


def conversations(count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` conversations, the kinds in turn, slots drawn with ``seed``."""
    rng = random.Random(seed)
    return [KINDS[i % len(KINDS)](rng) for i in range(count)]


ONE_TURN = (counting, sums, code, repeat)


def user_prompts(count: int, seed: int) -> list[str]:
    """``count`` one-turn user prompts (the kinds of ``ONE_TURN`` in turn), as a prompt set users
    bring to regeneration holds them."""
    rng = random.Random(seed)
    return [ONE_TURN[i % len(ONE_TURN)](rng)["messages"][0]["content"] for i in range(count)]


def prompt_and_reply(conversation: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The conversation before its last assistant turn (a prompt, as the acceptance command
    sends it) and that turn's text."""
    messages = conversation["messages"]
    last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    prompt = {**conversation, "messages": messages[:last]}
    return prompt, messages[last]["content"]
