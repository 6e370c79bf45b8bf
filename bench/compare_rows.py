"""Assert that two prepare_data outputs hold identical rows (same order, ids and masks):
``python compare_rows.py OUTPUT_A OUTPUT_B``; prints the number of rows."""

from __future__ import annotations

import sys
from typing import Any

from datasets import load_from_disk


def rows(path: str) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    dataset: Any = load_from_disk(path).with_format(None)
    return [(tuple(r["input_ids"]), tuple(r["loss_mask"])) for r in dataset]


def main() -> None:
    first, second = rows(sys.argv[1]), rows(sys.argv[2])
    if first != second:
        differing = sum(a != b for a, b in zip(first, second, strict=False))
        sys.exit(
            f"outputs differ: {len(first)} vs {len(second)} rows, "
            f"{differing} differing in the common part"
        )
    if not first:
        sys.exit("both outputs are empty")
    print(len(first))


if __name__ == "__main__":
    main()
