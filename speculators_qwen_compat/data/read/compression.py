"""JSON lines compressed as gz, bz2, xz or zst, opened as the plain file's bytes.

Why: the Hub holds many chat sets as ``.jsonl.gz``/``.jsonl.zst``, which upstream does not read
and a folder dropped without a word (docs/formats.md, "Data as the Hub holds it"). zst needs the
``zstandard`` package, as ``datasets`` does; its absence is one line saying what to install."""

from __future__ import annotations

import io
from pathlib import Path
from typing import IO

from speculators_qwen_compat.core.errors import DataError
from speculators_qwen_compat.data.read.table_rows import PARQUET_SUFFIX

JSON_SUFFIXES = (".json", ".jsonl")
#: compression suffix -> the module that opens it (zst: the zstandard package)
COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".xz": "lzma", ".zst": "zstandard"}
#: what is read, for the words of a file that is not
READ_FORMS = ".json, .jsonl (plain or .gz, .bz2, .xz, .zst) and .parquet"


def data_suffix(path: Path | str) -> tuple[str, str | None]:
    """The suffix that says the format and the compression after it, if any:
    ``chats.jsonl.gz`` -> (".jsonl", ".gz"), ``chats.jsonl`` -> (".jsonl", None)."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if len(suffixes) >= 2 and suffixes[-2] in JSON_SUFFIXES:
        return suffixes[-2], suffixes[-1]
    return (suffixes[-1] if suffixes else ""), None


def is_readable(path: Path | str) -> bool:
    """A file prepare_data reads: JSON (lines), compressed by a known method, or parquet."""
    suffix, compression = data_suffix(path)
    if compression is not None:
        return compression in COMPRESSIONS
    return suffix in (*JSON_SUFFIXES, PARQUET_SUFFIX)


def why_not_read(path: Path | str) -> str:
    """Why a file prepare_data does not read is not read (``is_readable`` is False)."""
    suffix, compression = data_suffix(path)
    if compression is not None:
        return (
            f"{suffix} compressed as {compression}, which is not read "
            f"(gz, bz2, xz and zst are): decompress it"
        )
    return f"not a data format prepare_data reads ({READ_FORMS})"


def require(path: Path | str, spec: str) -> None:
    """Fail at once, in one line, when ``path`` needs a package this venv lacks."""
    if data_suffix(path)[1] != ".zst":
        return
    try:
        import zstandard  # noqa: F401
    except ImportError:
        raise DataError(
            f"--data {spec}: {path} is compressed with zstd, which needs the zstandard "
            "package: pip install zstandard (or decompress it: zstd -d)"
        ) from None


def open_binary(path: Path) -> IO[bytes]:
    """The file's bytes, decompressed when its name says so (``data_suffix``)."""
    compression = data_suffix(path)[1]
    if compression == ".gz":
        import gzip

        return gzip.open(path, "rb")
    if compression == ".bz2":
        import bz2

        return bz2.open(path, "rb")
    if compression == ".xz":
        import lzma

        return lzma.open(path, "rb")
    if compression == ".zst":
        import zstandard

        raw = path.open("rb")
        # a stream reader has no readline: buffered, it reads lines as a plain file does
        reader = zstandard.ZstdDecompressor().stream_reader(raw, closefd=True)
        return io.BufferedReader(reader)  # type: ignore[arg-type]
    return path.open("rb")
