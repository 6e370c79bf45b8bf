"""Images in a render request: the ids vLLM 0.32's render endpoint puts in place of each one.

Target: data/render/render.py ``render_ids`` (local rendering, 0.8+). Pads per image from the
checkpoint's image processor and the header size (no decode), each image whole in the window;
what local rendering cannot match the server on is a counted skip (docs/images.md).
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.core.run_options import current_options
from speculators_qwen_compat.data.normalize import inline_media
from speculators_qwen_compat.data.render import media_faults, vllm_tokenizer

#: Content part types that carry media, as upstream's ``_adapt_part_for_vllm`` writes them.
IMAGE = "image_url"
OTHER_MEDIA = ("video_url", "audio_url", "input_audio", "video", "audio")
#: the skip reason's words per part type: the media, whichever form the data gave it in
_MEDIA_WORDS = {
    "video_url": "videos (a file or URL, in any part or column form) are",
    "video": "videos (a file or URL, in any part or column form) are",
    "audio_url": "audio is",
    "audio": "audio is",
    "input_audio": "audio is",
}
#: vLLM's message for a file that is not there (its 500 answer; counted as a skip on both paths).
MISSING_FILE = media_faults.MISSING_FILE
#: The one line of a run that meets images where this venv cannot read them.
NO_IMAGES = (
    "image parts need Pillow and the checkpoint's image processor to render locally: install "
    "them (pip install pillow torchvision) or render through a vLLM server with "
    "--render-endpoint URL"
)
#: vLLM's own limit on an image's pixels (``VLLM_MAX_IMAGE_PIXELS``, default 178,956,970).
VLLM_MAX_IMAGE_PIXELS = 178_956_970


class MediaUnavailable(CompatError):
    """Image parts met in a venv that cannot read images: fatal, one line naming the fix."""


class MediaNotRendered(ValueError):
    """A conversation whose media the local path cannot render as vLLM does: a counted skip."""

    data_problem = True  # counted as a skipped row, never as a bug (core/errors.py)


def image_urls(messages: list[dict[str, Any]]) -> list[str]:
    """The image URLs of the request in message order (the order vLLM numbers its items);
    raises ``MediaNotRendered`` for a media part this path does not render."""
    urls = []
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            continue
        for part in content:
            if not isinstance(part, Mapping):
                continue
            kind = part.get("type")
            if kind == IMAGE:
                spec = part.get(IMAGE)
                url = spec.get("url") if isinstance(spec, Mapping) else spec
                if not isinstance(url, str) or not url:
                    raise MediaNotRendered("image_url part without a url")
                urls.append(url)
            elif kind in OTHER_MEDIA:
                what = _MEDIA_WORDS.get(str(kind), str(kind))
                raise MediaNotRendered(
                    f"{what} rendered only by a vLLM server (local rendering counts image pads "
                    "only): use --render-endpoint URL"
                )
    return urls


def expand(
    processor: Any,
    ids: list[int],
    urls: list[str],
    truncate_prompt_tokens: int | None = None,
    truncation_side: str | None = None,
    mm_processor_kwargs: Mapping[str, Any] | None = None,
) -> list[int]:
    """``ids`` (the template's text tokenized, untruncated) with each image placeholder
    expanded to its count (under ``mm_processor_kwargs``, default ``--mm-processor-kwargs``),
    then truncated as vLLM truncates a multimodal prompt."""
    image_processor = getattr(processor, "image_processor", None)
    token_id = getattr(processor, "image_token_id", None)
    if image_processor is None or not isinstance(token_id, int):
        tokenizer = getattr(processor, "tokenizer", processor)
        path = str(getattr(tokenizer, "name_or_path", "") or "")
        if "vision_config" in vllm_tokenizer.checkpoint_config(path):
            raise MediaUnavailable(NO_IMAGES)  # a vision model whose processor this venv lacks
        raise MediaNotRendered("the target has no image processor (a text-only checkpoint)")
    pillow()  # the same fix for every row: fail before the first image is read
    kwargs = processor_kwargs() if mm_processor_kwargs is None else mm_processor_kwargs
    counts = [image_tokens(image_processor, url, kwargs) for url in urls]
    out: list[int] = []
    spans: list[tuple[int, int]] = []
    pending = iter(counts)
    for token in ids:
        count = next(pending, None) if token == token_id else None
        if count is None:
            out.append(token)
            continue
        spans.append((len(out), len(out) + count))
        out.extend([token_id] * count)
    if len(spans) != len(counts):  # a placeholder gone (vLLM: "Failed to apply prompt
        raise MediaNotRendered(media_faults.NOT_WHOLE)  # replacement"; data/render/media_faults.py)
    if truncate_prompt_tokens is None or not 0 <= truncate_prompt_tokens < len(out):
        return out
    start = len(out) - truncate_prompt_tokens if truncation_side == "left" else 0
    stop = start + truncate_prompt_tokens
    for begin, end in spans:
        if begin < start or end > stop:
            raise MediaNotRendered(media_faults.NOT_WHOLE)
    return out[start:stop]


def image_tokens(image_processor: Any, url: str, kwargs: Mapping[str, Any] | None = None) -> int:
    """The number of ``<|image_pad|>`` tokens vLLM gives the image at ``url``."""
    height, width = image_size(local_path(url))
    return count_for_size(image_processor, height, width, kwargs)


def count_for_size(
    image_processor: Any, height: int, width: int, kwargs: Mapping[str, Any] | None = None
) -> int:
    """Pads for an image of this size under ``kwargs`` (vLLM's ``mm_processor_kwargs``)."""
    try:
        patches = image_processor.get_number_of_image_patches(height, width, pixel_limits(kwargs))
    except ValueError:  # e.g. "absolute aspect ratio must be smaller than 200"
        raise MediaNotRendered(media_faults.REFUSED) from None
    return int(patches) // int(image_processor.merge_size) ** 2


def pixel_limits(kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """``kwargs`` as ``get_number_of_image_patches`` reads them: it takes ``min_pixels`` and
    ``max_pixels`` but ignores ``size`` (transformers 5.19 ``Qwen2VLImageProcessor``), which the
    processor itself reads as ``shortest_edge`` = min and ``longest_edge`` = max pixels."""
    out = dict(kwargs or {})
    size = out.pop("size", None)
    if isinstance(size, Mapping):
        if size.get("shortest_edge") is not None:
            out.setdefault("min_pixels", size["shortest_edge"])
        if size.get("longest_edge") is not None:
            out.setdefault("max_pixels", size["longest_edge"])
    return out


def image_size(path: Path) -> tuple[int, int]:
    """(height, width) of the image file as vLLM sees it, EXIF orientation applied;
    remembered per file (path, size, modification time) in this process, since every render of
    a conversation's prefixes asks again. A file vLLM would refuse raises ``MediaNotRendered``
    with the reason data/render/media_faults.py gives both paths."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise MediaNotRendered(media_faults.reason(str(exc)) or media_faults.UNREADABLE) from None
    return _header_size(str(path), stat.st_size, stat.st_mtime_ns)


#: Orientations (EXIF tag 0x0112) that swap width and height: transposed and rotated by 90/270.
_SWAPPED = frozenset({5, 6, 7, 8})
_ORIENTATION = 0x0112


@functools.lru_cache(maxsize=4096)
def _header_size(path: str, size: int, mtime_ns: int) -> tuple[int, int]:
    """The size from the file's header (no pixels decoded), then a check that vLLM can decode
    it, as cheap as the format allows (media_faults.py ``checked``)."""
    image_module, _ = pillow()
    try:
        with image_module.open(path) as image:
            width, height = image.size
            if width * height > VLLM_MAX_IMAGE_PIXELS:
                raise MediaNotRendered(media_faults.TOO_LARGE)
            orientation = 1
            with contextlib.suppress(Exception):  # as vLLM: a broken EXIF block is ignored
                orientation = int(image.getexif().get(_ORIENTATION) or 1)
        if Path(path).parent != inline_media.media_folder():  # its files were checked
            with image_module.open(path) as image:  # afresh: PNG's verify must come first
                media_faults.checked(image)
    except MediaNotRendered:
        raise
    except Exception as exc:  # OSError, SyntaxError (broken PNG), DecompressionBombError, ...
        raise MediaNotRendered(media_faults.reason(str(exc)) or media_faults.UNREADABLE) from None
    return (width, height) if orientation in _SWAPPED else (height, width)


def processor_kwargs() -> dict[str, Any]:
    """``--mm-processor-kwargs`` as this run was given it (``{}`` when not)."""
    return dict(current_options().mm_processor_kwargs)


def processor_kwargs_of(text: str | None) -> dict[str, Any]:
    """``--mm-processor-kwargs JSON`` as the run's options hold it (``{}`` when not given: not
    inherited from an earlier run); anything but a JSON object is the run's one-line error."""
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise CompatError(
            f"--mm-processor-kwargs {text}: give a JSON object, e.g. "
            "'{\"max_pixels\": 1003520}' (as the vLLM server was started with)"
        )
    return value


def pillow() -> tuple[Any, Any]:
    """Pillow's ``Image`` and ``ImageOps``, or the run's one-line fatal error."""
    try:
        from PIL import Image, ImageOps
    except ImportError:
        raise MediaUnavailable(NO_IMAGES) from None
    return Image, ImageOps


def local_path(url: str) -> Path:
    """The file a ``file://`` URL names (as vLLM reads it); other URLs are not rendered here."""
    parts = urlsplit(url)
    if parts.scheme != "file":
        scheme = parts.scheme or "no scheme"
        raise MediaNotRendered(
            f"image URLs other than file:// ({scheme}) are fetched only by a vLLM server: "
            "use --render-endpoint URL"
        )
    return Path(url2pathname(parts.netloc + parts.path))
