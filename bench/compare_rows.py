"""Assert that two prepare_data outputs hold identical rows (same order, ids and masks, and
``messages`` when they have it) and, when
both wrote one, the same token_freq.pt: ``python compare_rows.py OUTPUT_A OUTPUT_B [ids]``
(``ids``: ids and masks only, for outputs whose ``messages`` name the same images by different
files: inline images written to the media folder against the JSONL's paths); prints the
number of rows. Streams both datasets in Arrow batches (a million rows fit in no Python list)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from datasets import load_from_disk

COLUMNS = ["input_ids", "loss_mask"]
BATCH = 10_000


def main() -> None:
    first, second = (load_from_disk(path) for path in sys.argv[1:3])
    if len(first) != len(second):
        sys.exit(f"outputs differ: {len(first)} vs {len(second)} rows")
    if not len(first):
        sys.exit("both outputs are empty")
    # multimodal rows keep upstream's messages column: compared too when both have it
    ids_only = sys.argv[3:] == ["ids"]
    columns = COLUMNS + [c for c in ("messages",) if c in first.column_names and not ids_only]
    if set(first.column_names) != set(second.column_names):
        sys.exit(f"outputs differ in columns: {first.column_names} vs {second.column_names}")
    batches: Any = zip(
        first.select_columns(columns).with_format("arrow").iter(batch_size=BATCH),
        second.select_columns(columns).with_format("arrow").iter(batch_size=BATCH),
        strict=True,
    )
    for number, (a, b) in enumerate(batches):
        if not a.equals(b):
            sys.exit(f"outputs differ in rows {number * BATCH}-{number * BATCH + len(a) - 1}")
    freqs = [Path(path) / "token_freq.pt" for path in sys.argv[1:3]]
    if all(f.is_file() for f in freqs) and freqs[0].read_bytes() != freqs[1].read_bytes():
        sys.exit("the rows are the same but the token_freq.pt files differ")
    written = "and token_freq.pt " if all(f.is_file() for f in freqs) else ""
    print(f"{written}{len(first)}")


if __name__ == "__main__":
    main()
