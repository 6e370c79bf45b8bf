"""Rows, tokens and supervised spans in one run's output: ``python count_tokens.py OUTPUT``;
prints "ROWS TOKENS SPANS" (arrow_counts.py).

A prepare_data output (``save_to_disk``) is counted from its Arrow files; the floor loop and
the peer write their own ``count.txt`` (the floor supervises nothing: spans -)."""

from __future__ import annotations

import sys
from pathlib import Path

from arrow_counts import counts
from datasets import load_from_disk


def main() -> None:
    folder = Path(sys.argv[1])
    if (folder / "count.txt").is_file():
        print((folder / "count.txt").read_text().strip())
        return
    print(*counts(load_from_disk(str(folder)).data.table))


if __name__ == "__main__":
    main()
