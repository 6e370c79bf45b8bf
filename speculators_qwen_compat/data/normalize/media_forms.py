"""Images and videos in the forms people hold them, turned into upstream's form once.

Why: upstream reads only ``{"type": "image"|"video", "path"|"url"}`` parts and no image column
(docs/upstream.md, "Images in the forms people hold them"). The other forms (docs/images.md) become
those parts on every release and path; ``for_vllm`` goes the other way, for vLLM's endpoints.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from speculators_qwen_compat.data.normalize.inline_media import (
    InlineMediaError,
    from_base64,
    from_data_uri,
    from_pil,
    is_image_struct,
    is_pil,
    store,
)
from speculators_qwen_compat.data.normalize.media_paths import MediaFileMissing, resolve

#: media kinds, their placeholder and the row columns naming their files (LLaMA-Factory, LLaVA)
KINDS = ("image", "video")
PLACEHOLDER = {"image": "<image>", "video": "<video>"}
COLUMNS = {"image": ("images", "image"), "video": ("videos", "video")}
_SPLIT = re.compile("(<image>|<video>)")
#: text parts: ours and upstream's, and OpenAI Responses' input_text/output_text
TEXT_PARTS = ("text", "input_text", "output_text")
#: part types read; any other is a counted skip naming its type (upstream names a URL-less part)
READ_PARTS = (*TEXT_PARTS, *KINDS, "image_url", "video_url", "input_image")
INLINE = "inline (base64) media in content; give file paths or URLs"
FRAME_LIST = (
    "video given as a list of frames (the qwen-vl-utils form): vLLM renders a video file "
    "(video_url), not frames; give the video's path or URL"
)
IMAGE_LIST = "an image part holding a list: give one image per part"
RESPONSES_FILE_ID = (
    "Responses API input_image with a file_id (an uploaded file): give the image's path, URL "
    "or data: URI"
)


class MediaFormError(ValueError):
    """A row whose media cannot be read as a conversation; the message is the skip reason,
    ``detail`` what the ledger's example adds (a relative path as resolved)."""

    data_problem = True

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.detail = detail


def upstream_part(part: Any, source: str | None = None) -> Any:
    """One content part in upstream's media form (module docstring); other parts unchanged.
    ``source``: where its row was read (``file:line``), for a relative path."""
    if not isinstance(part, Mapping):
        return part
    kind = str(part.get("type") or "")
    if kind in ("image_url", "video_url", "input_image"):
        key = "image_url" if kind == "input_image" else kind
        spec = part.get(key)
        url = spec.get("url") if isinstance(spec, Mapping) else spec
        if not isinstance(url, str) or not url:
            if kind == "input_image" and part.get("file_id"):
                raise MediaFormError(RESPONSES_FILE_ID)
            return part  # upstream names what it cannot read
        return _source_part("video" if kind == "video_url" else "image", url, source)
    if kind not in KINDS:
        return part
    for key in ("path", "url"):
        value = part.get(key)
        if isinstance(value, str) and value:
            return _source_part(kind, value, source)
    if "base64" in part:
        return _stored(kind, part["base64"], "a 'base64' key")
    block = part.get("source")
    if isinstance(block, Mapping):  # Anthropic's image block
        return _anthropic_part(kind, block, source)
    value = part.get(kind)
    if isinstance(value, str) and value:
        return _source_part(kind, value, source)
    if isinstance(value, list):
        raise MediaFormError(FRAME_LIST if kind == "video" else IMAGE_LIST)
    if is_image_struct(value) or is_pil(value):  # a path given resolves as any other
        return _source_part(kind, _image_value(value, f"a {kind!r} part", source), source)
    return part


def _anthropic_part(kind: str, block: Mapping[str, Any], source: str | None) -> dict[str, str]:
    form = str(block.get("type") or "")
    if form == "base64" and isinstance(block.get("data"), str):
        return _stored(kind, block["data"], "an Anthropic base64 source block")
    if form == "url" and isinstance(block.get("url"), str) and block["url"]:
        return _source_part(kind, block["url"], source)
    raise MediaFormError(
        f"an Anthropic image source block of type {form or 'none'!r} (give base64 data or a url)"
    )


def _stored(kind: str, text: Any, form: str) -> dict[str, str]:
    if not isinstance(text, str):
        raise MediaFormError(f"inline image ({form}) is not base64 text")
    try:
        return {"type": kind, "path": from_base64(text, form)}
    except InlineMediaError as exc:
        raise MediaFormError(str(exc)) from None


def _source_part(kind: str, value: str, source: str | None = None) -> dict[str, str]:
    if value.startswith("data:"):
        if kind != "image":
            raise MediaFormError(f"inline {kind} (data: URI): give a file path or URL")
        try:
            return {"type": kind, "path": from_data_uri(value)}
        except InlineMediaError as exc:
            raise MediaFormError(str(exc)) from None
    if "://" in value:
        return {"type": kind, "url": value}
    try:
        return {"type": kind, "path": resolve(value, source)}
    except MediaFileMissing as exc:
        raise MediaFormError(str(exc), exc.resolved) from None


def _image_value(value: Any, form: str, source: str | None = None) -> str:
    """A ``datasets.Image()`` value (``{"bytes", "path"}``, or decoded) as a file path: its
    path when that names a file, else its bytes written once (data/normalize/inline_media.py)."""
    try:
        if is_pil(value):
            return from_pil(value)
        path, data = value.get("path"), value.get("bytes")
        if isinstance(path, str) and path and (not data or _holds(path, data, source)):
            return path
        if isinstance(data, (bytes, bytearray)) and data:
            return store(bytes(data), f"Image() bytes in {form}")
        if isinstance(data, str) and data:  # base64, as a JSON export writes bytes
            return from_base64(data, f"Image() bytes in {form}")
    except InlineMediaError as exc:
        raise MediaFormError(str(exc)) from None
    raise MediaFormError(f"{form} holds an Image() value with neither bytes nor a path")


def _holds(path: str, data: Any, source: str | None = None) -> bool:
    """Whether an ``Image()`` value's path names a file here holding the value's own bytes
    (else the bytes are used: a Hub dataset keeps the original file name, and a file of that
    name here may be another image)."""
    if isinstance(data, str):  # base64, as a JSON export writes bytes
        import base64
        import binascii

        try:
            data = base64.b64decode("".join(data.split()), validate=True)
        except (binascii.Error, ValueError):
            return False
    if "://" in path or not isinstance(data, (bytes, bytearray)):
        return False
    try:
        found = Path(resolve(path, source))
    except MediaFileMissing:
        return False
    try:
        return (
            found.is_file()
            and found.stat().st_size == len(data)
            and (found.read_bytes() == bytes(data))
        )
    except OSError:
        return False


def column_files(
    row: Mapping[str, Any], source: str | None = None
) -> dict[str, tuple[str, list[str]]]:
    """Per kind, the row's media column and the files it names (kinds with a column only)."""
    out: dict[str, tuple[str, list[str]]] = {}
    for kind, names in COLUMNS.items():
        for name in names:
            if row.get(name) is not None:
                out[kind] = (name, _entries(row[name], name, source))
                break
    return out


def _entries(value: Any, column: str, source: str | None = None) -> list[str]:
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                raise MediaFormError(
                    f"{column!r} column is not a path or a list of paths"
                ) from None
        else:
            value = [value] if text else []
    if isinstance(value, Mapping) or is_pil(value):
        value = [value]
    if not isinstance(value, list):
        raise MediaFormError(f"{column!r} column is not a path or a list of paths")
    files = []
    for entry in value:
        if is_pil(entry) or is_image_struct(entry):
            entry = _image_value(entry, f"the {column!r} column", source)
        elif isinstance(entry, Mapping):
            if entry.get("base64"):
                entry = _stored("image", entry["base64"], "a 'base64' key")["path"]
            else:
                entry = entry.get("path") or entry.get("url")
        if isinstance(entry, list):
            raise MediaFormError(
                f"{column!r} column holds a list of frames (qwen-vl-utils video form): "
                "vLLM takes a video file; give its path or URL"
            )
        if not isinstance(entry, str) or not entry:
            raise MediaFormError(f"{column!r} column holds an entry that is not a path or URL")
        files.append(entry)
    return files


def place_columns(
    turns: list[dict[str, Any]], row: Mapping[str, Any], source: str | None = None
) -> list[dict[str, Any]]:
    """``turns`` with each ``<image>``/``<video>`` placeholder of a non-assistant turn replaced
    by the part naming the next file of the row's column, in order (module docstring)."""
    files = column_files(row, source)
    found = {kind: 0 for kind in KINDS}
    for turn in turns:
        if turn.get("role") != "assistant":
            for kind in KINDS:
                found[kind] += _count(turn.get("content"), kind)
    for kind in KINDS:
        column, given = files.get(kind, ("", None))
        if given is None:
            if found[kind]:
                raise MediaFormError(
                    f"{PLACEHOLDER[kind]} placeholder in the text but no "
                    f"{' or '.join(repr(c) for c in COLUMNS[kind])} column names its file"
                )
            continue
        if found[kind] != len(given):
            raise MediaFormError(
                f"{found[kind]} {PLACEHOLDER[kind]} placeholders in the text but {len(given)} "
                f"files in the {column!r} column"
            )
    if not any(found.values()):
        return turns
    pending = {kind: iter(files.get(kind, ("", []))[1]) for kind in KINDS}
    out = []
    for turn in turns:
        content = turn.get("content")
        if turn.get("role") != "assistant" and any(_count(content, k) for k in KINDS):
            turn = {**turn, "content": _split(content, pending, source)}
        out.append(turn)
    return out


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [
            p["text"]
            for p in content
            if isinstance(p, Mapping)
            and p.get("type") in TEXT_PARTS
            and isinstance(p.get("text"), str)
        ]
    return []


def _count(content: Any, kind: str) -> int:
    """Placeholders of ``kind`` in ``content``: ``<image>`` in its text, and bare
    ``{"type": "image"}`` parts (TRL's and transformers' form beside an ``images`` column)."""
    texts = sum(text.count(PLACEHOLDER[kind]) for text in _texts(content))
    bare = sum(_bare(part) == kind for part in content) if isinstance(content, list) else 0
    return texts + bare


def _bare(part: Any) -> str | None:
    """The kind of a media part that names no file (a placeholder), else None."""
    if not isinstance(part, Mapping) or part.get("type") not in KINDS:
        return None
    kind = part["type"]
    named = any(
        part.get(key) not in (None, "") for key in ("path", "url", kind, "base64", "source")
    )
    return None if named else kind


def _split(content: Any, pending: dict[str, Any], source: str | None = None) -> list[Any]:
    parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
    out: list[Any] = []
    for part in parts:
        bare = _bare(part)
        if bare is not None:
            out.append(_source_part(bare, next(pending[bare]), source))
            continue
        is_text = isinstance(part, Mapping) and part.get("type") in TEXT_PARTS
        if not is_text or not isinstance(part.get("text"), str):
            out.append(part)
            continue
        for piece in _SPLIT.split(part["text"]):
            kind = next((k for k, p in PLACEHOLDER.items() if p == piece), None)
            if kind is not None:
                out.append(_source_part(kind, next(pending[kind]), source))
            elif piece:
                out.append({"type": "text", "text": piece})
    return out


def for_vllm(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Upstream's media parts as the ``image_url``/``video_url`` parts vLLM's OpenAI endpoints
    read (a path becomes ``file://`` + its absolute path, as upstream's adapter makes it)."""
    out = []
    for turn in turns:
        content = turn.get("content") if isinstance(turn, Mapping) else None
        if isinstance(content, list) and any(_is_media(p) for p in content):
            turn = {**turn, "content": [_vllm_part(p) for p in content]}
        out.append(turn)
    return out


def _is_media(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") in KINDS


def _vllm_part(part: Any) -> Any:
    if not _is_media(part):
        return part
    kind = part["type"]
    url = part.get("url")
    if isinstance(part.get("path"), str):
        url = f"file://{Path(part['path']).absolute()}"
    if not isinstance(url, str):
        return part
    return {"type": f"{kind}_url", f"{kind}_url": {"url": url}}
