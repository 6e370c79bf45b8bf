"""``token_frequency_probe.py WORK``: the token-frequency file the fixed ``preprocessing`` writes
next to the one upstream's own ``vocab_mapping.save_token_frequency_distribution`` writes, on the
same dataset (run with the fixes on; test_token_frequency.py). Prints one JSON line.

The dataset is shaped like prepare_data's output where it matters to the count: int ids, 0/1
masks, rows of different lengths, rows with nothing supervised, ids repeated across rows in an
order where first appearance and id order differ, more rows than one Arrow batch, an indices
mapping (``select``, as ``--max-samples`` makes) and torch format set."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import datasets
import torch
from speculators.data_generation import preprocessing
from speculators.train import vocab_mapping
from wrapt import ObjectProxy

import speculators_qwen_compat

ROWS = 2600  # more than one of the fix's Arrow batches


def rows(seed: int = 7) -> dict[str, list[list[int]]]:
    rng = random.Random(seed)
    ids, masks = [], []
    for row in range(ROWS):
        length = rng.randrange(0, 90)
        ids.append([rng.randrange(0, 3000 if row % 3 else 40) for _ in range(length)])
        masks.append([0] * length if row % 11 == 0 else [rng.random() < 0.6 for _ in ids[-1]])
        masks[-1] = [int(m) for m in masks[-1]]
    return {"input_ids": ids, "loss_mask": masks}


class UniqueCalls:
    """Counts ``Tensor.unique`` calls: upstream's loop makes one per row."""

    def __init__(self) -> None:
        self.calls = 0
        self.original = torch.Tensor.unique

    def __enter__(self) -> UniqueCalls:
        def counted(tensor: torch.Tensor, *args: object, **kwargs: object) -> object:
            self.calls += 1
            return self.original(tensor, *args, **kwargs)

        torch.Tensor.unique = counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        torch.Tensor.unique = self.original  # type: ignore[method-assign]


def main(work: Path) -> None:
    dataset = datasets.Dataset.from_dict(rows())
    dataset = dataset.select(range(ROWS - 1, 20, -1))  # an indices mapping, rows reversed
    dataset.set_format("torch")
    (work / "upstream").mkdir(parents=True)
    (work / "fixed").mkdir()
    upstream_file, fixed_file = (work / side / "token_freq.pt" for side in ("upstream", "fixed"))
    with UniqueCalls() as upstream_calls:
        vocab_mapping.save_token_frequency_distribution(dataset, upstream_file)
    with UniqueCalls() as fixed_calls:
        preprocessing.save_token_frequency_distribution(dataset, fixed_file)
    upstream = torch.load(upstream_file, weights_only=True)
    fixed = torch.load(fixed_file, weights_only=True)
    report = {
        "state": {f.name: f.state for f in speculators_qwen_compat.status()}["token_frequency"],
        "oracle_wrapped": isinstance(vocab_mapping.save_token_frequency_distribution, ObjectProxy),
        "rows": len(dataset),
        "upstream_unique_calls": upstream_calls.calls,
        "fixed_unique_calls": fixed_calls.calls,
        "ids": len(upstream),
        "same_counts": fixed == upstream,
        "same_order": list(fixed) == list(upstream),
        "same_bytes": fixed_file.read_bytes() == upstream_file.read_bytes(),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
