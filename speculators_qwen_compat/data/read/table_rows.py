"""Parquet, ``save_to_disk`` folders and ``hf:`` data sets, read as the same rows as JSON lines.

Why: upstream reads local JSON only (docs/formats.md, "Data as the Hub holds it"). Rows go on as
JSON text (``file[i]``) in record batches, parquet without pre-buffering, and an inline image's
bytes go to the media folder as read: memory and disk follow the batch, not the file."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from speculators_qwen_compat.core.errors import DataError
from speculators_qwen_compat.data.normalize.inline_media import (
    InlineMediaError,
    is_image_struct,
    media_folder,
    store,
)
from speculators_qwen_compat.data.normalize.media_paths import MediaFileMissing, resolve

PARQUET_SUFFIX = ".parquet"
HF_PREFIX = "hf:"
BATCH_ROWS = 64
#: what ``save_to_disk`` writes beside its Arrow files (never rows)
SAVED_MARKERS = ("dataset_info.json", "state.json", "dataset_dict.json")
METADATA_NAMES = frozenset({*SAVED_MARKERS, "dataset_infos.json"})


class TableRow(NamedTuple):
    text: str
    source: str


def is_hub_spec(spec: str) -> bool:
    """``hf:NAME_OR_PATH...`` (not upstream's ``hf://datasets/...jsonl`` URIs)."""
    return spec.startswith(HF_PREFIX) and not spec.startswith("hf://")


def is_saved_folder(path: Path) -> bool:
    """A folder ``Dataset.save_to_disk`` or ``DatasetDict.save_to_disk`` wrote."""
    return (path / "dataset_dict.json").is_file() or (
        (path / "state.json").is_file() and (path / "dataset_info.json").is_file()
    )


class ParquetFile:
    """One parquet file, read by row groups in record batches."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.suffix = PARQUET_SUFFIX

    def __str__(self) -> str:
        return str(self.path)

    def rows(self) -> Iterator[TableRow]:
        import pyarrow.parquet as pq

        try:
            reader = pq.ParquetFile(str(self.path), pre_buffer=False)
        except Exception as exc:  # ArrowInvalid: not a parquet file, truncated footer
            raise DataError(f"{self.path}: not a readable parquet file ({exc})") from None
        index = 0
        for batch in reader.iter_batches(batch_size=BATCH_ROWS):
            for row in batch.to_pylist():
                source = f"{self.path}[{index}]"
                yield TableRow(row_json(row, source), source)
                index += 1


class DatasetRows:
    """A ``datasets.Dataset`` (from ``load_from_disk`` or ``load_dataset``), memory-mapped."""

    def __init__(self, name: str, dataset: Any) -> None:
        self.name = name
        self.dataset = dataset
        self.suffix = ""

    def __str__(self) -> str:
        return self.name

    def rows(self) -> Iterator[TableRow]:
        index = 0
        arrow = self.dataset.with_format("arrow")  # Image() values stay {"bytes", "path"}
        for table in arrow.iter(batch_size=BATCH_ROWS):
            for row in table.to_pylist():
                source = f"{self.name}[{index}]"
                yield TableRow(row_json(row, source), source)
                index += 1


def saved_dataset(folder: Path, spec: str, split: str | None = None) -> DatasetRows:
    """A ``save_to_disk`` folder's rows (a DatasetDict: ``split``, else ``train``, else its only
    split)."""
    from datasets import DatasetDict, load_from_disk

    try:
        loaded = load_from_disk(str(folder))
    except Exception as exc:
        raise DataError(f"--data {spec}: cannot read the save_to_disk folder ({exc})") from None
    if isinstance(loaded, DatasetDict):
        loaded = _split_of(loaded, spec, split)
    return DatasetRows(str(folder), loaded)


def parse_hub_spec(spec: str) -> tuple[str, str | None, str | None]:
    """``hf:NAME_OR_PATH[:SUBSET]:SPLIT`` as upstream parses it: (name, subset, split or None)."""
    parts = spec.removeprefix(HF_PREFIX).split(":")
    if len(parts) > 3 or not parts[0] or any(p == "" for p in parts[1:]):
        raise DataError(f"--data {spec}: expected hf:NAME_OR_PATH[:SUBSET]:SPLIT")
    subset = parts[1] if len(parts) == 3 else None
    return parts[0], subset, parts[-1] if len(parts) > 1 else None


def hub_dataset(spec: str) -> DatasetRows:
    """A Hub data set by name (offline: from datasets' local cache), memory-mapped."""
    from datasets import load_dataset

    name, subset, split = parse_hub_spec(spec)
    try:
        dataset = load_dataset(name, name=subset, split=split or "train")
    except Exception as exc:
        raise DataError(f"--data {spec}: cannot load {name!r}: {_load_failure(exc)}") from None
    return DatasetRows(f"{HF_PREFIX}{name}", dataset)


def _load_failure(exc: BaseException) -> str:
    """What went wrong in ``load_dataset``, by its real cause: the offline mode is blamed only
    when the data set had to come from the Hub (the cause chain names a connection or the
    offline switch), never for a file that does not match its schema or a missing package."""
    causes = []
    seen: BaseException | None = exc
    while seen is not None and len(causes) < 8:
        causes.append(seen)
        seen = seen.__cause__ or seen.__context__
    words = " ".join(str(causes[-1] if len(causes) > 1 else exc).split())[:300]
    kinds = {type(c).__name__ for c in causes}
    text = " ".join(str(c) for c in causes)
    missing = next((c for c in causes if isinstance(c, ImportError)), None)
    if missing is not None or "zstandard" in text:
        package = getattr(missing, "name", None) or "zstandard"
        return f"a package it needs is missing ({package}): pip install {package}"
    if kinds & {"CastError", "DatasetGenerationCastError", "SchemaInferenceError"}:
        return (
            f"its files do not match the schema its README declares ({words}); fix the README's "
            "dataset_info features, or give the folder's files with --data"
        )
    offline = kinds & {"OfflineModeIsEnabled", "ConnectionError", "LocalEntryNotFoundError"}
    if offline or "offline" in text.lower() or "couldn't reach" in text.lower():
        return (
            f"{type(exc).__name__}: {words}; offline (HF_HUB_OFFLINE=1) only data sets in the "
            "local Hugging Face cache load"
        )
    return f"{type(exc).__name__}: {words}"


def _split_of(loaded: Any, spec: str, split: str | None) -> Any:
    names = list(loaded)
    if split is not None and split in loaded:
        return loaded[split]
    if split is None and "train" in loaded:
        return loaded["train"]
    if split is None and len(names) == 1:
        return loaded[names[0]]
    raise DataError(
        f"--data {spec}: no split {split or 'train'!r} (splits: {', '.join(names)}); name one "
        "with hf:PATH:SPLIT"
    )


def row_json(row: dict[str, Any], source: str | None = None) -> str:
    """One Arrow row as the JSON text a JSON lines file would hold (module docstring);
    ``source`` (``file[i]``) resolves an image value's relative path as the row's would."""
    return json.dumps(
        {key: _plain(value, source) for key, value in row.items()},
        ensure_ascii=False,
        default=str,  # dates, decimals: as text
    )


def _plain(value: Any, source: str | None) -> Any:
    if (is_image_struct(value) and _is_bytes(value.get("bytes"))) or _is_bytes(value):
        stored = _stored(value, source)
        if stored is not None:
            return {"path": stored}
    if isinstance(value, dict):
        return {
            key: _base64(item) if key == "bytes" and _is_bytes(item) else _plain(item, source)
            for key, item in value.items()
            if item is not None
        }
    if isinstance(value, list):
        return [_plain(item, source) for item in value]
    if _is_bytes(value):  # a binary column or part: an Image() value without its path
        return {"bytes": _base64(value)}
    return value


def _stored(value: Any, source: str | None) -> str | None:
    """An inline image written to the run's media folder now (data/normalize/inline_media.py):
    its path. None (the row keeps the bytes, and the normaliser decides as for any inline image:
    data/normalize/media_forms.py) without a media folder, when it is no whole image (a counted
    skip there), or when the value's ``path`` names a file here (which may be used instead)."""
    if media_folder() is None:
        return None
    if isinstance(value, dict):
        path = value.get("path")
        if isinstance(path, str) and path and "://" not in path:
            try:
                if Path(resolve(path, source)).is_file():
                    return None  # a file of that name is here
            except MediaFileMissing:
                pass  # a bare name found nowhere, as push_to_hub stores it
        value = value["bytes"]
    try:
        return store(bytes(value), "Image() bytes")
    except InlineMediaError:
        return None


def _is_bytes(value: Any) -> bool:
    return isinstance(value, (bytes, bytearray))


def _base64(value: Any) -> str:
    return base64.b64encode(bytes(value)).decode("ascii")
