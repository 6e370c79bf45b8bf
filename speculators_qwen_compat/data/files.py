"""Reading local ``.json``/``.jsonl`` training files without letting Arrow guess a schema.

``datasets``' JSON loader infers one Arrow schema per file: a file mixing ShareGPT and OpenAI
rows, string and list content, or tool-call arguments as strings and objects either fails to load
or comes back with every absent key filled with None. Here each row stays the JSON text it was
(one string column), with its ``file:line`` beside it; the map workers parse it. The parent only
splits lines and peeks at the first rows for the errors that must stop the run at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.data.normalize import CONVERSATION_KEYS

LINE_COLUMN = "_compat_line"
SOURCE_COLUMN = "_compat_source"
PEEK_ROWS = 200
JSON_SUFFIXES = (".json", ".jsonl")


@dataclass
class RawRows:
    lines: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    pretokenized: bool = False


def local_json_files(spec: str) -> list[Path] | None:
    """The files a ``--data`` value names, or None when it is not a local JSON file or folder
    (a hub spec or preset name, left to upstream)."""
    path = Path(spec)
    if spec.endswith(JSON_SUFFIXES):
        if not path.is_file():
            raise CompatError(f"--data {spec}: no such file")
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in JSON_SUFFIXES)
        if not files:
            raise CompatError(f"--data {spec}: the folder holds no .json or .jsonl files")
        return files
    return None


def read_rows(files: list[Path], conversation_key: str | None) -> RawRows:
    rows = RawRows()
    for path in files:
        text = _read_text(path)
        start = len(rows.lines)
        if path.suffix == ".json" and text.lstrip().startswith("["):
            _add_json_array(rows, path, text)
        else:
            _add_json_lines(rows, path, text)
        _check_first_rows(rows, path, range(start, len(rows.lines)), conversation_key)
    return rows


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")  # a leading BOM is not part of the data
    except UnicodeDecodeError as exc:
        raise CompatError(
            f"{path}: not UTF-8 text (byte {exc.start}); convert the file to UTF-8"
        ) from None


def _add_json_array(rows: RawRows, path: Path, text: str) -> None:
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CompatError(
            f"{path}:{exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno}); "
            "fix the file or write it as JSON lines"
        ) from None
    for index, item in enumerate(items):
        rows.lines.append(json.dumps(item, ensure_ascii=False))
        rows.sources.append(f"{path}[{index}]")


def _add_json_lines(rows: RawRows, path: Path, text: str) -> None:
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            rows.lines.append(line)
            rows.sources.append(f"{path}:{number}")


def _check_first_rows(rows: RawRows, path: Path, mine: range, conversation_key: str | None) -> None:
    """Stop at once on a file that cannot hold any conversation."""
    if not mine:
        raise CompatError(f"{path}: the file holds no rows; remove it from --data or fill it")
    parsed: list[dict[str, Any]] = []
    first_error = None
    for i in mine[:PEEK_ROWS]:
        try:
            value = json.loads(rows.lines[i])
        except json.JSONDecodeError as exc:
            first_error = first_error or f"{rows.sources[i]}: {exc.msg} at column {exc.colno}"
            continue
        if isinstance(value, dict):
            parsed.append(value)
    if not parsed:
        raise CompatError(
            f"{first_error or rows.sources[mine[0]] + ': not a JSON object'}; "
            "expected one JSON object per line"
        )
    if any("input_ids" in row and "loss_mask" in row for row in parsed):
        rows.pretokenized = True
        return
    keys = (conversation_key,) if conversation_key else CONVERSATION_KEYS
    if not any(row.get(key) is not None for row in parsed for key in keys):
        found = sorted({key for row in parsed for key in row})
        wanted = (
            f"a {conversation_key!r} column"
            if conversation_key
            else ("a 'conversations' (ShareGPT) or 'messages' (OpenAI) column")
        )
        raise CompatError(
            f"{path}: no conversation column (columns found: {', '.join(found) or 'none'}); "
            f"expected {wanted}, or name the column with --conversations-key"
        )
