"""The bench's image slice: ``python make_images.py FOLDER MODEL COUNT VOCAB [SEED]``.

Writes FOLDER/media/*.png (24 images from 48x48 up to 646x462, tests/image_corpus.py's PNG writer),
FOLDER/sharegpt.jsonl (COUNT conversations in OpenAI form: one to three user turns, each with
zero to two images given by path, the first always with one, and an assistant reply each) and
MODEL, the tests' weight-less composite Qwen3.6 checkpoint (``dense``: the real vocabulary, the
processor files) that local rendering and vLLM's render server both read.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

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
    image_corpus.model_folder(model, "dense", vocab)


if __name__ == "__main__":
    main()
