"""The floor: the same conversations rendered and tokenized in a plain loop, nothing else (no
datasets, no fixes, one process): ``python floor_loop.py MODEL MESSAGES_JSONL OUTPUT``; writes
"CONVERSATIONS TOKENS" to OUTPUT/count.txt."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from transformers import AutoTokenizer


def main() -> None:
    model, data, output = sys.argv[1:4]
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokens = rows = 0
    with open(data, encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            ids = tokenizer.apply_chat_template(
                row["messages"], tools=row.get("tools"), tokenize=True, return_dict=False
            )
            tokens += len(ids)
            rows += 1
    Path(output).mkdir(parents=True, exist_ok=True)
    (Path(output) / "count.txt").write_text(f"{rows} {tokens}\n")


if __name__ == "__main__":
    main()
