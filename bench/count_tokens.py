"""Rows and tokens in one run's output: ``python count_tokens.py OUTPUT``; prints "ROWS TOKENS".

A prepare_data output (``save_to_disk``) is counted from its ``input_ids`` offsets; the floor
loop's folder holds its own ``count.txt``."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.compute as pc
from datasets import load_from_disk


def main() -> None:
    folder = Path(sys.argv[1])
    if (folder / "count.txt").is_file():
        print((folder / "count.txt").read_text().strip())
        return
    ids = load_from_disk(str(folder)).data.column("input_ids")
    tokens = pc.sum(pc.list_value_length(ids)).as_py() or 0
    print(len(ids), tokens)


if __name__ == "__main__":
    main()
