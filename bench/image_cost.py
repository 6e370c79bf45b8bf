"""Per-image cost of learning an image's size: ``python image_cost.py FOLDER [ROUNDS]``.

Writes a 6000x4000 JPEG of noise (a 24 MP photo's size and entropy) to FOLDER and times, in one
process each (so each peak resident memory is its own):
- ``header``: Pillow's ``Image.open`` and the EXIF orientation (no pixels decoded);
- ``ours``: what local rendering does per new file (data/render/media.py ``_header_size``: the
  header, then the JPEG decoded at 1/8 scale to refuse what vLLM refuses);
- ``decode``: a full decode with the EXIF orientation applied (what vLLM does, and what local
  rendering did before).
Prints one JSON object: milliseconds per image (median of ROUNDS) and peak RSS in MB per method.
"""

from __future__ import annotations

import json
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

SIZE = (6000, 4000)


def write_photo(path: Path) -> Path:
    from PIL import Image

    rng = random.Random(7)
    small = Image.frombytes("RGB", (600, 400), bytes(rng.randrange(256) for _ in range(720_000)))
    small.resize(SIZE, Image.Resampling.BICUBIC).save(path, quality=90)
    return path


def measure(method: str, path: Path, rounds: int) -> dict[str, float]:
    from PIL import Image, ImageOps

    from speculators_qwen_compat.data.render import media

    def header() -> None:
        with Image.open(path) as image:
            _ = image.size, image.getexif().get(0x0112)

    def ours() -> None:
        media._header_size.cache_clear()
        media.image_size(path)

    def decode() -> None:
        with Image.open(path) as image:
            ImageOps.exif_transpose(image).load()

    run = {"header": header, "ours": ours, "decode": decode}[method]
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        run()
        times.append((time.perf_counter() - began) * 1000)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"ms": statistics.median(times), "peak_mb": peak}


def main() -> None:
    folder = Path(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    if len(sys.argv) > 3:  # a child: one method
        print(json.dumps(measure(sys.argv[3], folder / "photo.jpg", rounds)))
        return
    folder.mkdir(parents=True, exist_ok=True)
    write_photo(folder / "photo.jpg")
    out = {}
    for method in ("header", "ours", "decode"):
        child = [sys.executable, __file__, str(folder), str(rounds), method]
        out[method] = json.loads(subprocess.run(child, capture_output=True, check=True).stdout)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
