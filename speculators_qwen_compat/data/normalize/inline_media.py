"""Images held inline in the data, written once to content-addressed files beside the output.

Why: upstream 0.8+ refuses inline images and sends images to vLLM as ``file://`` paths
(docs/images.md, "Images held inline"). Each whole image is written once, atomically, to
``<media folder>/<sha256>.<format>``; without a media folder, or not decoding, it is a skip."""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import os
import socket
import tempfile
from pathlib import Path
from typing import Any

from speculators_qwen_compat.core.run_options import current_options
from speculators_qwen_compat.data.render.media_faults import UNREADABLE, checked, reason

#: The media folder's name beside ``--output``: ``<output>-media``.
SUFFIX = "-media"

#: Image formats by their first bytes: the file name's extension (what vLLM and Pillow sniff).
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpg"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"BM", "bmp"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
)


class InlineMediaError(ValueError):
    """An inline image that cannot be written; the message is the skip reason."""

    data_problem = True  # counted as a skipped row (data/account/row_errors.py)


def folder_for(output: Path) -> Path:
    """The media folder beside ``output``: ``<output>-media`` (absolute)."""
    absolute = Path(os.path.abspath(output))
    return absolute.with_name(absolute.name + SUFFIX)


def choose_folder(output: Path) -> Path:
    """The media folder of a run writing ``output`` (for its options), what killed writers left
    there swept first; the folder itself is made on the first image."""
    folder = folder_for(output)
    sweep_dead_writers(folder)
    return folder


def _incoming_prefix(pid: int) -> str:
    """A writer's temporary names: host and pid, so a later run can tell a dead writer's."""
    return f".incoming-{socket.gethostname()}-{pid}-"


def sweep_dead_writers(folder: Path) -> list[Path]:
    """Remove the temporary files a killed writer on this host left in ``folder`` (never an
    image, never a live writer's or another host's file); the files removed."""
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    host_prefix = f".incoming-{socket.gethostname()}-"
    for path in folder.glob(host_prefix + "*"):
        pid_text = path.name[len(host_prefix) :].partition("-")[0]
        if pid_text.isdigit() and not _alive(int(pid_text)):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def images_in(folder: Path | None) -> frozenset[str]:
    """The names of the images a media folder holds (none while it does not exist); the
    temporary files of writers at work are not images yet."""
    if folder is None or not folder.is_dir():
        return frozenset()
    return frozenset(p.name for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))


def kept_note(output: Path) -> str:
    """For a failed run's error line: the media folder of a run writing ``output``, when it
    holds images (they stay: a rerun with the same --output reuses them; nothing a run wrote is
    deleted). From ``output``, not the run's options: they are put back when the run ends."""
    folder = folder_for(output)
    images = images_in(folder)
    if not images:
        return ""
    return (
        f"the {len(images)} images in {folder} stay (a rerun with the same --output reuses "
        "them; delete the folder if you drop this run)"
    )


def scratch_folder() -> Path:
    """A media folder for a run that writes no output (doctor), for its options: made in the
    temp folder, removed when this process exits; the folder the options name when they do."""
    folder = media_folder()
    if folder is not None:
        return folder
    import atexit
    import shutil

    made = Path(tempfile.mkdtemp(prefix="speculators-qwen-compat-media-"))
    atexit.register(shutil.rmtree, made, True)
    return made


def media_folder() -> Path | None:
    value = current_options().inline_media_dir
    return Path(value) if value else None


def image_format(data: bytes) -> str | None:
    """The image format's extension from the first bytes, or None when not an image format."""
    for magic, ext in _MAGIC:
        if data.startswith(magic):
            return ext
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


def store(data: bytes, form: str) -> str:
    """Write ``data`` (an image's bytes, held inline as ``form``) once; its absolute path."""
    folder = media_folder()
    if folder is None:
        raise InlineMediaError(
            f"inline image ({form}): prepare_data writes such images to a media folder "
            "beside --output; this run has none (run python -m "
            "speculators_qwen_compat.prepare_data), or give file paths"
        )
    ext = image_format(data)
    if ext is None:
        raise InlineMediaError(f"inline image ({form}) holds bytes that are not an image file")
    target = os.path.join(folder, f"{hashlib.sha256(data).hexdigest()}.{ext}")
    # checked before it is named, also when an earlier run (perhaps of an older release of this
    # package) wrote it: local rendering trusts the media folder's files (render/media.py)
    _check_whole(data)
    with contextlib.suppress(FileNotFoundError):
        if os.stat(target).st_size == len(data):
            return target  # written before (this run or an earlier one)
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=_incoming_prefix(os.getpid()), dir=folder)
    try:
        with os.fdopen(handle, "wb") as out:
            os.fchmod(handle, 0o644)
            out.write(data)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def _check_whole(data: bytes) -> None:
    """Raise the skip for bytes Pillow cannot decode, checked as local rendering checks a
    file (data/render/media_faults.py ``checked``: a PNG by its checksums, a JPEG at 1/8 scale).
    Without Pillow nothing can decode an image here; the render's own check decides."""
    import io

    try:
        from PIL import Image
    except ImportError:
        return
    try:
        with Image.open(io.BytesIO(data)) as image:
            checked(image)
    except Exception as exc:  # OSError, SyntaxError (a broken PNG), DecompressionBombError
        raise InlineMediaError(reason(str(exc)) or UNREADABLE) from None


def from_base64(text: str, form: str) -> str:
    """``store`` of base64 text (whitespace allowed, as in wrapped exports)."""
    try:
        data = base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        raise InlineMediaError(f"inline image ({form}) is not valid base64") from None
    return store(data, form)


def from_data_uri(uri: str) -> str:
    """``store`` of a ``data:<type>;base64,<payload>`` URI."""
    head, comma, payload = uri.partition(",")
    if not comma or not head.endswith(";base64"):
        raise InlineMediaError("inline image (data: URI) is not base64-encoded (';base64,')")
    return from_base64(payload, "data: URI")


def from_pil(image: Any) -> str:
    """``store`` of a decoded image (a PIL image from ``datasets.Image()``), in the format it
    was read from (PNG when it has none), so its size and pads are the original's."""
    import io

    fmt = getattr(image, "format", None) or "PNG"
    buffer = io.BytesIO()
    try:
        image.save(buffer, format=fmt)
    except (OSError, ValueError, KeyError):
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
    return store(buffer.getvalue(), "a decoded Image() value")


def is_pil(value: Any) -> bool:
    return type(value).__module__.startswith("PIL.") and hasattr(value, "save")


def is_image_struct(value: Any) -> bool:
    """``datasets.Image()`` as stored: a mapping with ``bytes`` and/or ``path`` only."""
    return isinstance(value, dict) and bool(value) and set(value) <= {"bytes", "path"}
