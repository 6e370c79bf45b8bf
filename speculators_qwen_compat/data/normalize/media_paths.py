"""Relative image and video paths: the folder they are relative to, and what a miss says.

Why: upstream resolves against the working directory and a miss never says where it looked. Here
``--media-dir``, else the data file's folder, else the working directory; a miss is a counted
skip naming what it tried (docs/images.md, "Relative paths: --media-dir").
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from speculators_qwen_compat.core.run_options import current_options

_SOURCE_INDEX = re.compile(r"(:\d+|\[\d+\])\Z")


class MediaFileMissing(ValueError):
    """A relative media path found under no folder; the message is the skip reason (bounded: it
    names the folder, not the file) and ``resolved`` the path as resolved."""

    data_problem = True

    def __init__(self, reason: str, resolved: str) -> None:
        super().__init__(reason)
        self.resolved = resolved


def root_of(folder: str | None) -> str | None:
    """``--media-dir DIR`` as the run's options hold it (checked: a folder; absolute)."""
    if folder is None:
        return None
    if not Path(folder).is_dir():
        from speculators_qwen_compat.core.errors import CompatError

        raise CompatError(f"--media-dir {folder}: no such folder")
    return os.path.abspath(folder)


def data_folder(source: str | None) -> Path | None:
    """The folder of the data file a row's source names, or None (a hub name, no source)."""
    if not source:
        return None
    return _folder_of(_SOURCE_INDEX.sub("", source).removeprefix("hf:"), os.getcwd())


@functools.lru_cache(maxsize=256)
def _folder_of(name: str, cwd: str) -> Path | None:
    """A data file's (or folder's) folder, for a ``name`` relative to ``cwd``: asked for every
    relative path of every row, and a run's data files stay where they are while it reads."""
    path = Path(name)
    if path.is_file():
        return path.parent.absolute()
    if path.is_dir():
        return path.absolute()
    return None


def resolve(value: str, source: str | None = None) -> str:
    """``value`` (a path as the data gives it, in the row read from ``source``: ``file:line``,
    ``file[i]``, ``hf:NAME[i]``) as an absolute path; raises ``MediaFileMissing`` for a
    relative path found under none of the folders tried."""
    if os.path.isabs(value):
        return value
    root = current_options().media_root
    if root:
        return _found(Path(root) / value, value, f"--media-dir {root}")
    folder = data_folder(source)
    cwd = Path.cwd()
    if folder is not None and folder != cwd and (folder / value).exists():
        return str(folder / value)
    against = f"the working directory {cwd}"
    if folder is not None and folder != cwd:
        against = f"the data file's folder {folder} and {against}"
    return _found(cwd / value, value, against)


def _found(path: Path, given: str, against: str) -> str:
    if path.exists():
        return str(path)
    raise MediaFileMissing(
        f"[Errno 2] No such file or directory: relative media path resolved against {against} "
        "(name the folder with --media-dir)",
        f"{given!r} -> {path}",
    )
