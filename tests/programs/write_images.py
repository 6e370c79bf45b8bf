"""Write solid-colour PNGs with Pillow: ``write_images.py FOLDER NAME=WxH ...`` (the pipeline
tier's images, written by the vision venv: the CPU test venv has no Pillow)."""

import sys
from pathlib import Path

from PIL import Image

folder = Path(sys.argv[1])
folder.mkdir(parents=True, exist_ok=True)
for i, spec in enumerate(sys.argv[2:]):
    name, _, size = spec.partition("=")
    width, height = (int(n) for n in size.split("x"))
    Image.new("RGB", (width, height), (40 * i % 256, 200, 90)).save(folder / name)
