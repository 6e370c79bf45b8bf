"""Write image conversations as a Hub data set holds them: ``write_hub_parquet.py OUT.parquet
IMAGE ...``: LLaMA-Factory rows (``messages`` with ``<image>`` placeholders, ``images:
Sequence(Image())``), each image's bytes in the file under a bare file name that is nowhere on
disk (what ``push_to_hub`` stores), written by ``datasets`` itself. Rows: one per image, then
one with every image in one turn."""

import sys
from pathlib import Path

from datasets import Dataset, Features, Image, Sequence, Value

out, images = Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]]


def row(files: list[Path], question: str, reply: str) -> dict:
    return {
        "messages": [
            {"role": "user", "content": "<image>" * len(files) + question},
            {"role": "assistant", "content": reply},
        ],
        "images": [{"bytes": f.read_bytes(), "path": f.name} for f in files],
    }


rows = [row([f], f"What is in picture {i}?", f"Picture {i}, green.") for i, f in enumerate(images)]
rows.append(row(images, "Which is wider?", "The last one."))
features = Features({
    "messages": [{"role": Value("string"), "content": Value("string")}],
    "images": Sequence(Image()),
})  # fmt: skip
Dataset.from_list(rows, features=features).to_parquet(str(out))
