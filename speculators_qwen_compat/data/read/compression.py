"""JSON lines compressed as gz, bz2, xz or zst, opened as the plain file's bytes.

Why: the Hub holds many chat sets as ``.jsonl.gz``/``.jsonl.zst``, which upstream does not read
and a folder dropped without a word (docs/formats.md, "Data as the Hub holds it"). zst needs the
``zstandard`` package, as ``datasets`` does; its absence is one line saying what to install."""

from __future__ import annotations

import io
from pathlib import Path
from typing import IO, Any

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
        return io.BufferedReader(_ZstdFrames(path))
    return path.open("rb")


class _ZstdFrames(io.RawIOBase):
    """A .zst file's frames, decompressed; a file cut inside a frame raises ``EOFError`` at its
    end, as gzip, bz2 and lzma do (zstandard's stream reader ends there without a word)."""

    def __init__(self, path: Path) -> None:
        import zstandard

        self._zstd = zstandard
        self._file = path.open("rb")
        self._frame = zstandard.ZstdDecompressor().decompressobj()
        self._pending = b""
        self._started = False  # a frame has begun and not ended

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = self._file.read(1 << 16)
            if not chunk:
                if self._started:
                    raise EOFError("the file ends inside a zstd frame")
                return 0
            while chunk:
                self._started = True
                self._pending += self._frame.decompress(chunk)
                if not self._frame.eof:
                    break
                chunk = self._frame.unused_data  # the next frame's first bytes, if any
                self._frame = self._zstd.ZstdDecompressor().decompressobj()
                self._started = bool(chunk)
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size

    def close(self) -> None:
        self._file.close()
        super().close()
