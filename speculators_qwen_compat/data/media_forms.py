"""Images and videos in the forms people hold them, turned into upstream's form once.

Target: the normaliser (data/normalize.py), on every release and path (0.6/0.7 processor rows,
0.8/0.9 local and server rendering, doctor, regenerate-responses). Upstream's adapter
(``_adapt_part_for_vllm``, 0.8.1/0.9.0 preprocessing.py, docs/upstream.md "Images") reads only
``{"type": "image"|"video", "path": P}`` and ``{"type": ..., "url": U}``; it refuses Qwen's own
``{"type": "image", "image": ...}`` part and the OpenAI ``image_url`` part, and nothing upstream
reads an image column: LLaVA and LLaMA-Factory rows were written as text holding ``<image>``.

Forms read here (``docs/images.md``):
- parts: Qwen's ``{"type": "image"|"video", "image"|"video": str}`` (a path, a ``file://`` or
  http(s) URL), OpenAI's ``{"type": "image_url"|"video_url", "image_url": {"url": U}}`` and the
  same with the URL as a plain string: all become ``{"type": kind, "path": P}`` (a path) or
  ``{"type": kind, "url": U}`` (a URL, ``file://`` included, as given);
- row columns: LLaVA's ``image`` (one path, or a list), LLaMA-Factory's ``images`` and
  ``videos`` (lists): the i-th ``<image>`` (``<video>``) placeholder in the text of the
  non-assistant turns, in order, becomes a part naming the i-th file, the text around it text
  parts; a bare ``{"type": "image"}`` part (TRL's form beside an ``images`` column) is a
  placeholder too. A count of placeholders that differs from the files given is a skip with
  both counts.
- a literal ``<image>``/``<video>`` in a user, system or tool turn of a row that names no such
  files is a skip too ("the images of this row are missing"): a drafter trained on it learns a
  placeholder the verifier never sees. In assistant turns the text is the reply's own and stays.
- inline bytes (``data:`` URLs, ``base64`` keys, bytes in a column entry) are skips naming the
  fix (write the files, give their paths): what speculators 0.8+ refuse too.

``for_vllm`` is the other direction, for requests sent to vLLM's OpenAI endpoints
(regenerate-responses): upstream's parts as ``image_url``/``video_url`` parts with a ``file://``
URL of the absolute path (what ``_adapt_part_for_vllm`` sends to ``/render``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: media kinds, their placeholder and the row columns naming their files (LLaMA-Factory, LLaVA)
KINDS = ("image", "video")
PLACEHOLDER = {"image": "<image>", "video": "<video>"}
COLUMNS = {"image": ("images", "image"), "video": ("videos", "video")}
_SPLIT = re.compile("(<image>|<video>)")
INLINE = "inline (base64) media in content; give file paths or URLs"


class MediaFormError(ValueError):
    """A row whose media cannot be read as a conversation; the message is the skip reason."""

    data_problem = True


def upstream_part(part: Any) -> Any:
    """One content part in upstream's media form (module docstring); other parts unchanged."""
    if not isinstance(part, Mapping):
        return part
    kind = str(part.get("type") or "")
    if kind in ("image_url", "video_url"):
        spec = part.get(kind)
        url = spec.get("url") if isinstance(spec, Mapping) else spec
        if not isinstance(url, str) or not url:
            return part  # upstream names what it cannot read
        return _source_part(kind.removesuffix("_url"), url)
    if kind in KINDS and "path" not in part and "url" not in part:
        value = part.get(kind)
        if isinstance(value, str) and value:
            return _source_part(kind, value)
    return part


def _source_part(kind: str, value: str) -> dict[str, str]:
    if value.startswith("data:"):
        raise MediaFormError(INLINE)
    return {"type": kind, "url" if "://" in value else "path": value}


def column_files(row: Mapping[str, Any]) -> dict[str, tuple[str, list[str]]]:
    """Per kind, the row's media column and the files it names (kinds with a column only)."""
    out: dict[str, tuple[str, list[str]]] = {}
    for kind, names in COLUMNS.items():
        for name in names:
            if row.get(name) is not None:
                out[kind] = (name, _entries(row[name], name))
                break
    return out


def _entries(value: Any, column: str) -> list[str]:
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
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list):
        raise MediaFormError(f"{column!r} column is not a path or a list of paths")
    files = []
    for entry in value:
        if isinstance(entry, Mapping):  # datasets' Image feature undecoded: {"bytes", "path"}
            if entry.get("bytes") or entry.get("base64"):
                raise MediaFormError(INLINE)
            entry = entry.get("path") or entry.get("url")
        if not isinstance(entry, str) or not entry:
            raise MediaFormError(f"{column!r} column holds an entry that is not a path or URL")
        if entry.startswith("data:"):
            raise MediaFormError(INLINE)
        files.append(entry)
    return files


def place_columns(turns: list[dict[str, Any]], row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``turns`` with each ``<image>``/``<video>`` placeholder of a non-assistant turn replaced
    by the part naming the next file of the row's column, in order (module docstring)."""
    files = column_files(row)
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
            turn = {**turn, "content": _split(content, pending)}
        out.append(turn)
    return out


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [
            p["text"]
            for p in content
            if isinstance(p, Mapping) and p.get("type") == "text" and isinstance(p.get("text"), str)
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
    named = any(part.get(key) not in (None, "") for key in ("path", "url", kind, "base64"))
    return None if named else kind


def _split(content: Any, pending: dict[str, Any]) -> list[Any]:
    parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
    out: list[Any] = []
    for part in parts:
        bare = _bare(part)
        if bare is not None:
            out.append(_source_part(bare, next(pending[bare])))
            continue
        is_text = isinstance(part, Mapping) and part.get("type") == "text"
        if not is_text or not isinstance(part.get("text"), str):
            out.append(part)
            continue
        for piece in _SPLIT.split(part["text"]):
            kind = next((k for k, p in PLACEHOLDER.items() if p == piece), None)
            if kind is not None:
                out.append(_source_part(kind, next(pending[kind])))
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
