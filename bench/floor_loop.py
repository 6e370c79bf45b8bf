"""The floor: the same conversations rendered and tokenized in a plain loop, nothing else (no
datasets, no fixes, one process): ``python floor_loop.py MODEL MESSAGES_JSONL``."""

from __future__ import annotations

import json
import sys

from transformers import AutoTokenizer


def main() -> None:
    model, data = sys.argv[1:3]
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokens = 0
    with open(data, encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            ids = tokenizer.apply_chat_template(
                row["messages"], tools=row.get("tools"), tokenize=True, return_dict=False
            )
            tokens += len(ids)
    print(tokens)


if __name__ == "__main__":
    main()
