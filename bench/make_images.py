"""The bench's image slice: ``python make_images.py FOLDER MODEL COUNT VOCAB [SEED]``.

Writes FOLDER/media/*.png (24 images from 48x48 up to 646x462, tests/image_corpus.py's PNG writer),
FOLDER/sharegpt.jsonl (COUNT conversations in OpenAI form: one to three user turns, each with
zero to two images given by path, the first always with one, and an assistant reply each),
FOLDER/train.parquet (the same conversations as a Hub data set holds them: LLaMA-Factory
``messages`` with ``<image>`` placeholders and ``images: Sequence(Image())`` holding each image's
bytes under a bare file name, datasets' own schema and metadata) and MODEL, the tests'
weight-less composite Qwen3.6 checkpoint (``dense``: the real vocabulary, the processor files)
that local rendering and vLLM's render server both read.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import image_corpus  # noqa: E402

SIZES = [(48 + 26 * i, 48 + 18 * ((i * 7) % 24)) for i in range(24)]
QUESTIONS = ["What is in this picture?", "Describe the colours.", "Compare these.", "And now?"]
ANSWERS = ["A smooth gradient from dark to light.", "Mostly grey, 40% darker at the left.", "Ok."]


def main() -> None:
    folder, model, vocab = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[4])
    count = int(sys.argv[3])
    rng = random.Random(int(sys.argv[5]) if len(sys.argv) > 5 else 7)
    media = folder / "media"
    media.mkdir(parents=True, exist_ok=True)
    images = [image_corpus.png(media / f"{w}x{h}.png", w, h) for w, h in SIZES]
    rows: list[dict[str, Any]] = []
    with (folder / "sharegpt.jsonl").open("w", encoding="utf-8") as out:
        for _ in range(count):
            messages = []
            for turn in range(rng.randint(1, 3)):
                shown = rng.randint(1 if turn == 0 else 0, 2)
                parts = [{"type": "image", "path": str(p)} for p in rng.sample(images, shown)]
                parts.append({"type": "text", "text": rng.choice(QUESTIONS)})
                messages += [
                    {"role": "user", "content": parts},
                    {"role": "assistant", "content": rng.choice(ANSWERS)},
                ]
            out.write(json.dumps({"messages": messages}) + "\n")
            rows.append(_hub_row(messages))
    _write_parquet(folder / "train.parquet", rows)
    image_corpus.model_folder(model, "dense", vocab)


def _hub_row(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """One conversation in LLaMA-Factory's form, each image's bytes inline (``Image()``)."""
    images: list[dict[str, Any]] = []
    turns = []
    for turn in messages:
        content = turn["content"]
        if isinstance(content, list):
            shown = [Path(p["path"]) for p in content if p["type"] == "image"]
            images += [{"bytes": p.read_bytes(), "path": p.name} for p in shown]
            text = "".join(p["text"] for p in content if p["type"] == "text")
            content = "<image>" * len(shown) + text
        turns.append({"role": turn["role"], "content": content})
    return {"messages": turns, "images": images}


def _write_parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    """With pyarrow and datasets' schema (the CPU base has no Pillow, which encoding needs)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from datasets import Features, Image, Sequence, Value

    features = Features({
        "messages": [{"role": Value("string"), "content": Value("string")}],
        "images": Sequence(Image()),
    })  # fmt: skip
    table = pa.Table.from_pylist(rows, schema=features.arrow_schema)
    pq.write_table(table, str(path), row_group_size=100)


if __name__ == "__main__":
    main()
