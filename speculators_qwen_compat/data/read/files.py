"""Reading local ``.json``/``.jsonl`` training files without letting Arrow guess a schema.

Why: datasets' JSON loader infers one schema per file, so mixed rows fail or gain None-filled keys.
Each row stays its JSON text with its ``file:line``, streamed into a memory-mapped Arrow file in
the run's own folder, so memory does not grow with the data (other sources: table_rows.py).
"""

from __future__ import annotations

import atexit
import codecs
import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple

from speculators_qwen_compat.core.errors import DataError
from speculators_qwen_compat.core.run import current_run, running
from speculators_qwen_compat.data.read import compression, run_folders
from speculators_qwen_compat.data.read.columns import (
    ColumnOptions,
    NoConversation,
    find_conversation,
    no_conversation_message,
)

LINE_COLUMN = "_compat_line"
SOURCE_COLUMN = "_compat_source"
PEEK_ROWS = 200
CHUNK_BYTES = 1 << 20
BATCH_ROWS = 2000
BATCH_CHARS = 32 << 20
CACHE_FOLDER = "speculators_qwen_compat_rows"


class RawRow(NamedTuple):
    """One row as read: its JSON text and where it came from (``file:line`` or ``file[i]``)."""

    text: str
    source: str


@dataclass
class RawRows:
    """The first rows of some files (doctor's dry run), and how many rows the files hold."""

    lines: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    total: int = 0
    pretokenized: bool = False


class RowStream:
    """The rows of ``files`` in order, one at a time, checking the first rows of each file.

    Iterating stops early, with ``pretokenized`` set, at the first file whose first rows carry
    ``input_ids`` and ``loss_mask`` (upstream reads such data itself).
    """

    def __init__(self, files: Iterable[Any], conversation_key: str | None) -> None:
        self.files = list(files)
        self.conversation_key = conversation_key
        self.pretokenized = False

    def __iter__(self) -> Iterator[RawRow]:
        for path in self.files:
            rows = file_rows(path)
            first: list[RawRow] = []
            for row in rows:
                first.append(row)
                if len(first) == PEEK_ROWS:
                    break
            if check_first_rows(path, first, self.conversation_key):
                self.pretokenized = True
                return
            yield from first
            yield from rows


def read_rows(files: list[Any], conversation_key: str | None, keep: int) -> RawRows:
    """The first ``keep`` rows of ``files`` and the number of rows in all (for doctor)."""
    out = RawRows()
    stream = RowStream(files, conversation_key)
    for row in stream:
        if out.total < keep:
            out.lines.append(row.text)
            out.sources.append(row.source)
        out.total += 1
    out.pretokenized = stream.pretokenized
    return out


def rows_to_arrow(stream: RowStream) -> Path | None:
    """Write the stream's rows to an Arrow file in a run folder under datasets' cache, in
    bounded batches; its path, or None when the data turned out pretokenized."""
    from datasets import Features, Value
    from datasets.arrow_writer import ArrowWriter

    path = _run_folder() / "rows.arrow"
    features = Features({LINE_COLUMN: Value("string"), SOURCE_COLUMN: Value("string")})
    writer = ArrowWriter(features=features, path=str(path))
    try:
        texts: list[str] = []
        sources: list[str] = []
        chars = 0
        for row in stream:
            texts.append(row.text)
            sources.append(row.source)
            chars += len(row.text)
            if len(texts) >= BATCH_ROWS or chars >= BATCH_CHARS:
                writer.write_batch({LINE_COLUMN: texts, SOURCE_COLUMN: sources})
                texts, sources, chars = [], [], 0
        if texts:
            writer.write_batch({LINE_COLUMN: texts, SOURCE_COLUMN: sources})
        writer.finalize()
    finally:
        writer.close()
    return None if stream.pretokenized else path


def load_rows(files: list[Any], conversation_key: str | None) -> Any:
    """A memory-mapped ``datasets.Dataset`` of the files' rows (two string columns), or None
    when the data is pretokenized."""
    from datasets import Dataset

    path = rows_to_arrow(RowStream(files, conversation_key))
    return None if path is None else Dataset.from_file(str(path))


_made: list[tuple[int, Path]] = []


def _run_folder() -> Path:
    """A new folder for this run under datasets' cache, removed when this process exits; the
    folders of runs that died without removing theirs (SIGKILL, out of memory) are swept first
    (run_folders.py)."""
    from datasets import config

    parent = Path(config.HF_DATASETS_CACHE) / CACHE_FOLDER
    folder = run_folders.make(parent, "run-")
    if not _made:
        atexit.register(_remove_run_folders)
    _made.append((os.getpid(), folder))
    return folder


@contextmanager
def maps_to_disk(dataset: Any) -> Iterator[None]:
    """While upstream's dataset builder runs: its one ``map`` over our reader's rows writes them
    to Arrow files in the run's folder (memory-mapped), not into memory (``keep_in_memory``);
    the run (core/run.py) holds which dataset that is until the map or the builder ends."""
    if not from_our_reader(dataset):
        yield
        return
    with running() as run:
        before, run.to_disk = run.to_disk, id(dataset)
        try:
            yield
        finally:
            run.to_disk = before


def map_kwargs(dataset: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``Dataset.map``'s keyword arguments: ``keep_in_memory`` off for that one map."""
    run = current_run()
    if run is not None and run.to_disk == id(dataset) and kwargs.get("keep_in_memory"):
        run.to_disk = None  # only upstream's one map over the rows
        return {**kwargs, "keep_in_memory": False}
    return kwargs


def from_our_reader(dataset: Any) -> bool:
    """Whether ``dataset`` is memory-mapped from this reader's files (its run folder)."""
    files = getattr(dataset, "cache_files", None) or []
    return bool(files) and all(CACHE_FOLDER in str(f.get("filename", "")) for f in files)


def _remove_run_folders() -> None:
    for pid, folder in _made:
        if pid == os.getpid():  # not in forked map workers
            run_folders.release(folder)


def file_rows(path: Any) -> Iterator[RawRow]:
    """The non-blank rows of one file: a JSON array's items, else its lines; a table source's
    rows (data/read/table_rows.py) as JSON text."""
    if not isinstance(path, Path):
        for row in path.rows():
            yield RawRow(row.text, row.source)
        return
    try:
        with compression.open_binary(path) as handle:
            head = handle.read(CHUNK_BYTES)
        array = compression.data_suffix(path)[0] == ".json"
        array = array and head.removeprefix(codecs.BOM_UTF8).lstrip()[:1] == b"["
        with compression.open_binary(path) as handle:  # afresh: a compressed stream
            yield from (_array_items if array else _json_lines)(path, handle)
    except (OSError, EOFError, ValueError) as exc:
        if isinstance(exc, DataError) or compression.data_suffix(path)[1] is None:
            raise
        # gzip.BadGzipFile, lzma.LZMAError, zstandard.ZstdError (a ValueError) ...
        packed = compression.data_suffix(path)[1]
        raise DataError(
            f"{path}: cannot be read as {packed}-compressed data ({type(exc).__name__}: {exc}); "
            "the file is damaged or cut short (download it again), or not compressed that way"
        ) from None


def _not_utf8(where: str, byte: int) -> DataError:
    return DataError(f"{where}: not UTF-8 text (byte {byte}); convert the file to UTF-8")


def _json_lines(path: Path, handle: IO[bytes]) -> Iterator[RawRow]:
    offset = 0
    for number, raw in enumerate(handle, start=1):
        start = 3 if number == 1 and raw.startswith(codecs.BOM_UTF8) else 0
        try:
            line = raw[start:].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _not_utf8(f"{path}:{number}", offset + start + exc.start) from None
        offset += len(raw)
        if line.strip():
            yield RawRow(line.rstrip("\r\n"), f"{path}:{number}")


class _ArrayReader:
    """Chunks of a JSON array file as text, with the line count of what was dropped."""

    def __init__(self, path: Path, handle: IO[bytes]) -> None:
        self.path, self.handle = path, handle
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.text, self.pos, self.lines_before, self.bytes_read = "", 0, 0, 0
        self.columns_before = 0  # characters dropped from the buffer's first line
        self.eof = False

    def more(self) -> bool:
        """Read one more chunk; False at the end of the file."""
        if self.eof:
            return False
        if self.pos > CHUNK_BYTES:
            newlines = self.text.count("\n", 0, self.pos)
            last = self.text.rfind("\n", 0, self.pos)
            self.columns_before = self.pos - last - 1 + (0 if newlines else self.columns_before)
            self.lines_before += newlines
            self.text, self.pos = self.text[self.pos :], 0
        chunk = self.handle.read(CHUNK_BYTES)
        self.eof = not chunk
        try:
            self.text += self.decoder.decode(chunk, final=self.eof)
        except UnicodeDecodeError as exc:
            raise _not_utf8(str(self.path), self.bytes_read + exc.start) from None
        self.bytes_read += len(chunk)
        return True

    def skip_space(self) -> str:
        """The next non-blank character (reading on as needed), "" at the end of the file."""
        while True:
            while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
                self.pos += 1
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self.more():
                return ""

    def error(self, exc: json.JSONDecodeError | None, what: str = "") -> DataError:
        if exc is None:
            first = self.text.count("\n", 0, self.pos) == 0
            line = self.lines_before + self.text.count("\n", 0, self.pos) + 1
            column = self.pos - self.text.rfind("\n", 0, self.pos)
            msg = what
        else:
            first = exc.lineno == 1
            line, column, msg = self.lines_before + exc.lineno, exc.colno, exc.msg
        column += self.columns_before if first else 0
        return DataError(
            f"{self.path}:{line}: not valid JSON ({msg} at column {column}); "
            "fix the file or write it as JSON lines"
        )


def _array_items(path: Path, handle: IO[bytes]) -> Iterator[RawRow]:
    reader = _ArrayReader(path, handle)
    decoder = json.JSONDecoder()
    reader.skip_space()
    reader.pos += 1  # the "[" seen by file_rows
    index = 0
    if reader.skip_space() == "]":
        reader.pos += 1
    else:
        while True:
            if not reader.skip_space():
                raise reader.error(None, "Expecting value")
            while True:
                try:
                    _, end = decoder.raw_decode(reader.text, reader.pos)
                except json.JSONDecodeError as exc:
                    if reader.more():
                        continue
                    raise reader.error(exc) from None
                if end < len(reader.text) or not reader.more():  # a number may go on
                    break
            yield RawRow(reader.text[reader.pos : end], f"{path}[{index}]")
            index += 1
            reader.pos = end
            after = reader.skip_space()
            reader.pos += 1
            if after == "]":
                break
            if after != ",":
                reader.pos -= 1
                raise reader.error(None, "Expecting ',' delimiter")
    if reader.skip_space():
        raise reader.error(None, "Extra data")


def check_first_rows(path: Any, first: list[RawRow], conversation_key: str | None) -> bool:
    """Stop at once on a file that cannot hold any conversation; True when its first rows are
    pretokenized (``input_ids`` and ``loss_mask``)."""
    if not first:
        raise DataError(f"{path}: the file holds no rows; remove it from --data or fill it")
    parsed: list[dict[str, Any]] = []
    first_error = None
    for row in first:
        try:
            value = json.loads(row.text)
        except json.JSONDecodeError as exc:
            first_error = first_error or f"{row.source}: {exc.msg} at column {exc.colno}"
            continue
        if isinstance(value, dict):
            parsed.append(value)
    if not parsed:
        raise DataError(
            f"{first_error or first[0].source + ': not a JSON object'}; "
            "expected one JSON object per line"
        )
    if any("input_ids" in row and "loss_mask" in row for row in parsed):
        return True
    options = ColumnOptions.of_this_run()
    if conversation_key:
        options = ColumnOptions(conversation_key, options.prompt, options.response, options.system)
    for row in parsed:
        try:
            find_conversation(row, options)
            return False
        except NoConversation:
            continue
    found = sorted({key for row in parsed for key in row})
    raise DataError(no_conversation_message(str(path), found, conversation_key))
