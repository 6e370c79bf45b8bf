"""The floor for speculators 0.8+: the same rows as ``--render-endpoint local`` (a row per
assistant turn: the conversation through that turn), produced in a plain loop with one render
per conversation where the template allows it, nothing else (no datasets, no fixes, one
process): ``python floor_rows.py MODEL MESSAGES_JSONL OUTPUT SEQ_LENGTH``; writes
"ROWS TOKENS" to OUTPUT/count.txt (the runs table sets them beside the entry point's).

Qwen3.6's template drops the reasoning of assistant turns before the last user message, so the
rows of one user message's answer (an agentic trace's tool-call turns and its last reply) are
cuts of one render through its last turn, and each user message starts a new render. A row ends
after its turn's ``<|im_end|>\\n``, where the tokenizer splits anyway (a special token), so the cut
ids are the ids of the prefix's own render.
"""

from __future__ import annotations

import bisect
import json
import sys
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

ASSISTANT, END = "<|im_start|>assistant", "<|im_end|>\n"


def answers(messages: list[dict[str, Any]]) -> list[list[int]]:
    """The assistant turns' indices, grouped by the user message they answer."""
    groups: list[list[int]] = []
    fresh = True
    for index, turn in enumerate(messages):
        if turn["role"] == "user":
            fresh = True
        elif turn["role"] == "assistant":
            if fresh:
                groups.append([])
                fresh = False
            groups[-1].append(index)
    return groups


def rows_of(
    tokenizer: Any, messages: list[dict[str, Any]], tools: Any, limit: int
) -> list[list[int]]:
    """Each assistant turn's row (input ids, at most ``limit``), one render per answered user
    message; a turn that starts past ``limit`` has nothing to supervise and gives no row."""
    rows = []
    for group in answers(messages):
        text = tokenizer.apply_chat_template(messages[: group[-1] + 1], tools=tools, tokenize=False)
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ends = [end for _, end in encoded["offset_mapping"]]
        starts, at = [], 0
        while (at := text.find(ASSISTANT, at)) >= 0:
            starts.append(at)
            at += len(ASSISTANT)
        for start in starts[-len(group) :]:
            if bisect.bisect_right(ends, text.index("\n", start) + 1) >= limit:
                continue
            cut = text.index(END, start) + len(END)
            rows.append(encoded["input_ids"][: min(bisect.bisect_right(ends, cut), limit)])
    return rows


def main() -> None:
    model, data, output, seq_length = sys.argv[1:5]
    tokenizer = AutoTokenizer.from_pretrained(model)
    rows = tokens = 0
    with open(data, encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            for ids in rows_of(tokenizer, row["messages"], row.get("tools"), int(seq_length)):
                rows += 1
                tokens += len(ids)
    Path(output).mkdir(parents=True, exist_ok=True)
    (Path(output) / "count.txt").write_text(f"{rows} {tokens}\n")


if __name__ == "__main__":
    main()
