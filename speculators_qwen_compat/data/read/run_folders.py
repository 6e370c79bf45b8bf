"""Folders a run owns for its lifetime, and the sweep that removes those of dead runs.

Why: removing scratch folders at exit misses a run killed by SIGKILL or for memory. Each folder's
lock file is held with ``fcntl.flock`` while its run lives, so "owner dead" is exactly "the lock
can be taken"; registered folders are listed per user so any later run sweeps them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import stat
import tempfile
import time
from pathlib import Path

LOCK_SUFFIX = ".lock"
CLAIM_PREFIX = ".claim-"
#: a claim file this old and unlocked belongs to a run killed while claiming
CLAIM_GRACE_SECONDS = 60.0

#: the registry's folder in the temporary folder, followed by the user's id
REGISTRY_PREFIX = "sqc-run-folders-"

#: folder -> the open lock file holding it (kept open for the life of the process).
_held: dict[Path, int] = {}
#: registered folder -> its link in the registry
_listed: dict[Path, Path] = {}


def make(parent: Path, prefix: str, registered: bool = False) -> Path:
    """A new folder ``parent/prefix...`` owned by this process, after sweeping the folders
    under the same prefix whose owners are dead (and, ``registered``, the dead ones listed in
    the registry, where the new folder is listed too)."""
    parent.mkdir(parents=True, exist_ok=True)
    book = registry() if registered else None
    if book is not None:
        sweep_registered(book)
    sweep(parent, prefix)
    fd, temporary = tempfile.mkstemp(prefix=CLAIM_PREFIX, dir=parent)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a fresh file: nobody else holds it
    try:
        folder = _claimed_folder(Path(temporary), parent, prefix, book)
    except BaseException:
        os.close(fd)
        raise
    finally:
        os.unlink(temporary)
    _held[folder] = fd
    return folder


def _claimed_folder(claim: Path, parent: Path, prefix: str, book: Path | None) -> Path:
    """A new name under ``parent``: listed in ``book`` (if any), the held ``claim`` linked as
    its lock file (the link fails if another run took the name), then the folder made."""
    while True:
        folder = parent / f"{prefix}{secrets.token_hex(6)}"
        entry = None if book is None else _list(book, folder)
        try:
            os.link(claim, _lock_of(folder))
        except FileExistsError:
            _unlist(entry)
            continue
        try:
            folder.mkdir(mode=0o700)  # private, as mkdtemp makes it
        except FileExistsError:  # a folder of that name without its lock: not ours
            _lock_of(folder).unlink()
            _unlist(entry)
            continue
        if entry is not None:
            _listed[folder] = entry
        return folder


def registry() -> Path | None:
    """This user's registry of run folders (made private on first use); None when that name
    is taken by anything but a folder of this user's."""
    book = Path(tempfile.gettempdir()) / f"{REGISTRY_PREFIX}{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        book.mkdir(mode=0o700)
    info = book.lstat()
    return book if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() else None


def _list(book: Path, folder: Path) -> Path:
    while True:
        entry = book / secrets.token_hex(8)
        try:
            os.symlink(os.path.abspath(_lock_of(folder)), entry)
            return entry
        except FileExistsError:
            continue


def _unlist(entry: Path | None) -> None:
    if entry is not None:
        with contextlib.suppress(FileNotFoundError):
            entry.unlink()


def sweep_registered(book: Path | None = None) -> list[Path]:
    """Remove the folders listed in the registry whose lock nobody holds, wherever they are,
    and the links whose lock file is gone for longer than CLAIM_GRACE_SECONDS; the folders
    removed."""
    book = book or registry()
    removed: list[Path] = []
    for entry in sorted(book.iterdir()) if book is not None else []:
        try:
            lock = Path(os.readlink(entry))
        except OSError:  # not a link of ours, or unlisted meanwhile
            continue
        folder = lock.with_name(lock.name.removesuffix(LOCK_SUFFIX))
        if folder in _held or not lock.name.endswith(LOCK_SUFFIX):
            continue
        if os.path.lexists(lock):
            if _remove_if_unheld(lock, folder):
                removed.append(folder)
                _unlist(entry)
        else:
            with contextlib.suppress(FileNotFoundError):
                if time.time() - entry.lstat().st_mtime > CLAIM_GRACE_SECONDS:
                    _unlist(entry)
    return removed


def release(folder: Path, remove: bool = True) -> None:
    """Give up a folder of this process: remove it (unless ``remove`` is False, when it was
    renamed away), then its lock file, then the lock."""
    fd = _held.pop(folder, None)
    if remove:
        shutil.rmtree(folder, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        _lock_of(folder).unlink()
    _unlist(_listed.pop(folder, None))
    if fd is not None:
        os.close(fd)


def owned(folder: Path) -> bool:
    """Whether this process holds ``folder``."""
    return folder in _held


def sweep(parent: Path, prefix: str) -> list[Path]:
    """Remove the folders ``parent/prefix*`` whose lock nobody holds, and the claim files of
    runs killed while claiming; the folders removed."""
    removed = []
    for lock in sorted(parent.glob(f"{glob_escape(prefix)}*{LOCK_SUFFIX}")):
        folder = lock.with_name(lock.name[: -len(LOCK_SUFFIX)])
        if folder in _held:
            continue
        if _remove_if_unheld(lock, folder):
            removed.append(folder)
    for claim in parent.glob(f"{glob_escape(CLAIM_PREFIX)}*"):
        with contextlib.suppress(FileNotFoundError):
            if time.time() - claim.stat().st_mtime > CLAIM_GRACE_SECONDS:
                _remove_if_unheld(claim, None)
    return removed


def live(parent: Path, prefix: str) -> list[Path]:
    """The folders ``parent/prefix*`` another process holds (its run is alive)."""
    found = []
    for lock in sorted(parent.glob(f"{glob_escape(prefix)}*{LOCK_SUFFIX}")):
        folder = lock.with_name(lock.name[: -len(LOCK_SUFFIX)])
        if folder in _held:
            continue
        try:
            fd = os.open(lock, os.O_RDWR)
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            found.append(folder)
        finally:
            os.close(fd)  # closing drops a lock taken here: a dead run's folder, left to sweep
    return found


def _remove_if_unheld(lock: Path, folder: Path | None) -> bool:
    """Remove ``folder`` (if any), then ``lock``, when nobody holds ``lock``; whether it did."""
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:  # swept by someone else meanwhile
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # its run is alive
            return False
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()
        return True
    finally:
        os.close(fd)


def glob_escape(text: str) -> str:
    """``text`` matched literally in a glob pattern."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def _lock_of(folder: Path) -> Path:
    return folder.with_name(folder.name + LOCK_SUFFIX)
