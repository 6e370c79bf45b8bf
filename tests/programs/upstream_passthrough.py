"""``upstream_passthrough.py MODEL DATA SEQ_LENGTH WORK``: the installed release's own
``load_and_preprocess_dataset`` on one file of speculator-format rows (run with the fixes off:
conftest.FIXES_OFF), printing its rows as one JSON line ``[[input_ids, loss_mask], ...]``: the
oracle of test_speculator_rows.py for what upstream's pass-through keeps (0.7+)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    model, data, seq_length, work = argv
    from speculators.data_generation import preprocessing

    dataset, _ = preprocessing.load_and_preprocess_dataset(
        model,
        [data],
        seq_length=int(seq_length),
        build_dataset_num_proc=1,
        token_freq_path=str(Path(work) / "token_freq.pt"),
    )
    rows = dataset.with_format(None)
    print(json.dumps([[list(r["input_ids"]), list(r["loss_mask"])] for r in rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
