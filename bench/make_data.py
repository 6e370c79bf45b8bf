"""Write the benchmark's conversations: ``python make_data.py FOLDER KIND COUNT SEED``.

KIND ``mix``: the realistic mix a Qwen3.6 drafter is trained on: 55% chat (one exchange, a few
hundred tokens), 30% multi-turn (3-6 exchanges, some with reasoning), 15% long agentic traces
(a system prompt, tools, 2-6 tool calls each with reasoning, tool results of a few hundred
tokens; several thousand tokens in all). KIND ``chat``: short one-exchange chats only (the
memory runs at 100,000 and 1,000,000 conversations, where upstream's in-memory output must fit).

Writes ``FOLDER/sharegpt.jsonl`` (ShareGPT rows, what every prepare_data run reads) and
``FOLDER/messages.jsonl`` (the same conversations ready for a chat template: OpenAI turns,
tool-call arguments as objects) for the plain-loop floor. Texts are drawn from a fixed pool of
generated paragraphs (English, code, some Chinese), so sizes are realistic and generation fast.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

from speculators_qwen_compat.demo.sample_data import to_sharegpt

WORD_TEXT = (
    "the model returns a list of values from each request and the server keeps state for every "
    "user while tests check that results match what we expected before deployment so please "
    "review configuration files logs metrics latency throughput memory cache token batch queue"
)
WORDS = WORD_TEXT.split()
CODE = [
    "def handler(event, context):\n    items = [x for x in event['items'] if x]\n"
    "    return {'count': len(items)}\n",
    "for (let i = 0; i < rows.length; i++) {\n  total += rows[i].value;\n}\n",
    "SELECT id, name FROM users WHERE created_at > NOW() - INTERVAL '7 days';\n",
]
CHINESE = "我们需要检查配置文件并确认服务器的状态，然后再继续部署新的版本。"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name.replace('_', ' ')} in the workspace",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "query": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
    for name in ("read_file", "run_command", "search_code", "write_file")
]


class Texts:
    """A pool of paragraphs of various lengths, drawn from a seeded generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.pool = [self._paragraph(rng.randint(8, 60)) for _ in range(4000)]

    def _paragraph(self, words: int) -> str:
        text = " ".join(self.rng.choices(WORDS, k=words)).capitalize() + "."
        roll = self.rng.random()
        if roll < 0.15:
            text += "\n\n```\n" + self.rng.choice(CODE) + "```"
        elif roll < 0.25:
            text += " " + CHINESE
        return text

    def words(self, paragraphs: int) -> str:
        return "\n\n".join(self.rng.choices(self.pool, k=paragraphs))


def chat(t: Texts, index: int) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": f"#{index} " + t.words(1)},
            {"role": "assistant", "content": t.words(t.rng.randint(1, 4))},
        ]
    }


def short_chat(t: Texts, index: int) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": f"#{index} " + t.rng.choice(t.pool)[:120]},
            {"role": "assistant", "content": t.rng.choice(t.pool)[:200]},
        ]
    }


def multi_turn(t: Texts, index: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if t.rng.random() < 0.5:
        messages.append({"role": "system", "content": "You are a helpful assistant."})
    for turn in range(t.rng.randint(3, 6)):
        messages.append({"role": "user", "content": f"#{index}.{turn} " + t.words(1)})
        answer: dict[str, Any] = {"role": "assistant", "content": t.words(t.rng.randint(1, 3))}
        if t.rng.random() < 0.4:
            answer["reasoning_content"] = t.words(1)
        messages.append(answer)
    return {"messages": messages}


def agentic(t: Texts, index: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. " + t.words(2)},
        {"role": "user", "content": f"#{index} " + t.words(2)},
    ]
    for step in range(t.rng.randint(2, 6)):
        tool = t.rng.choice(TOOLS)["function"]["name"]
        arguments = {"path": f"src/module_{step}.py", "query": t.rng.choice(t.pool)[:60]}
        call_id = f"call_{index}_{step}"
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": t.words(t.rng.randint(1, 2)),
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": tool, "arguments": json.dumps(arguments)},
                    }
                ],
            }
        )
        messages.append(
            {"role": "tool", "tool_call_id": call_id, "content": t.words(t.rng.randint(1, 3))}
        )
    messages.append({"role": "assistant", "content": t.words(2), "reasoning_content": t.words(1)})
    return {"messages": messages, "tools": TOOLS}


def template_ready(row: dict[str, Any]) -> dict[str, Any]:
    """The row with every tool call's JSON-string ``arguments`` parsed to an object."""
    messages = []
    for turn in row["messages"]:
        if turn.get("tool_calls"):
            turn = dict(turn)
            turn["tool_calls"] = [
                {
                    **c,
                    "function": {
                        **c["function"],
                        "arguments": json.loads(c["function"]["arguments"]),
                    },
                }
                for c in turn["tool_calls"]
            ]
        messages.append(turn)
    return {**row, "messages": messages}


def main() -> None:
    folder, kind, count, seed = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    texts = Texts(rng)
    folder.mkdir(parents=True, exist_ok=True)
    with (
        (folder / "sharegpt.jsonl").open("w", encoding="utf-8") as sharegpt,
        (folder / "messages.jsonl").open("w", encoding="utf-8") as ready,
    ):
        for index in range(count):
            if kind == "chat":
                row = short_chat(texts, index)
            else:
                roll = rng.random()
                build = chat if roll < 0.55 else multi_turn if roll < 0.85 else agentic
                row = build(texts, index)
            sharegpt.write(json.dumps(to_sharegpt(row), ensure_ascii=False) + "\n")
            ready.write(json.dumps(template_ready(row), ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
