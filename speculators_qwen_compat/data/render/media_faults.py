"""One rule for an image a conversation names but vLLM cannot use: the skip reason, the same
whether local rendering (data/render/media.py) or a vLLM 0.32 render server
(data/render/render_faults.py) met it. Why: both wordings hold the (masked) path or an address,
so each fault is one fixed reason (docs/images.md, "Faults"; docs/upstream.md, "Images in the
forms people hold them").
"""

from __future__ import annotations

import re
from typing import Any

MISSING_FILE = "[Errno 2] No such file or directory: '<path>'"
FOLDER = "[Errno 21] Is a directory: the image path names a folder"
UNREADABLE = "Failed to load image: not an image file Pillow can decode (or truncated)"
TOO_LARGE = "image has more pixels than vLLM's limit (VLLM_MAX_IMAGE_PIXELS, 178956970)"
_PROCESSOR = re.compile(r"Failed to apply \w*Processor on data")
REFUSED = "the image processor refuses the image (an aspect ratio above 200?)"
NOT_WHOLE = (
    "an image does not lie whole in the rendered prompt (cut by the truncation to --seq-length, "
    "or its placeholder dropped): raise --seq-length or shorten the conversation"
)

#: (words in vLLM's or Pillow's message, the reason): first match wins
_RULES = (
    ("would split or drop a(n) image item", NOT_WHOLE),
    ("Failed to apply prompt replacement for mm_items", NOT_WHOLE),
    ("No such file or directory", MISSING_FILE),
    ("Is a directory", FOLDER),
    ("Permission denied", UNREADABLE),
    ("decompression bomb", TOO_LARGE),
    ("exceeds limit of", TOO_LARGE),
    ("exceed the maximum of", TOO_LARGE),
    ("cannot identify image file", UNREADABLE),
    ("image file is truncated", UNREADABLE),
    ("Failed to load image", UNREADABLE),
)


def reason(message: str) -> str | None:
    """The skip reason for a media fault described by ``message`` (vLLM's error text, or the
    local exception's), or None when ``message`` is not about an image file."""
    if _PROCESSOR.search(message) or "aspect ratio must be smaller than" in message:
        return REFUSED
    return next((fixed for words, fixed in _RULES if words in message), None)


def checked(image: Any) -> None:
    """Raise what decoding raises for a file vLLM cannot load, decoding as little as the format
    allows: a JPEG at 1/8 scale (its DCT reads every block of the file: a truncated or damaged
    file fails as in a full decode, for about 1/64 of the memory), a PNG by its chunks' checksums
    (``verify``: no pixels), other formats in full (docs/images.md "Cost")."""
    if image.format == "JPEG":
        width, height = image.size
        image.draft("RGB", (max(1, width // 8), max(1, height // 8)))
        image.load()
    elif image.format == "PNG":
        image.verify()
    else:
        image.load()
