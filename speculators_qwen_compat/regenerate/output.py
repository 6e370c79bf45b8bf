"""Where a regenerate-responses run writes: the partial file, its lock, resume and the final rename.

Why: upstream appends to ``--outfile`` (reruns double it, kills tear lines) and an empty resume
deleted the earlier file (docs/upstream.md, "Regenerate responses"). Here one locked writer, a
partial file published at the end (docs/regenerate-responses.md, "Resume and the lock").
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.regenerate import torn


class RowWriter:
    """The file object upstream's workers get for ``--outfile`` (fixes/regenerate/regen_run.py):
    ``write`` keeps one conversation's rows, ``flush`` writes them with one ``os.write`` to the
    locked partial file. A conversation is counted once its rows are written, never before
    (``expect``: the count waits here until ``flush`` has written them), so a count always
    agrees with the file. On an OSError the bytes written are cut back off, the run is told
    (state.write_failed) and every later write fails the same way, uncounted."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd, self.path = fd, path
        self.rows: list[str] = []
        self.failed: OSError | None = None
        #: (primary id, how to count it) of the conversation whose rows upstream writes next
        self.pending: tuple[str, Callable[[], None]] | None = None
        #: conversations whose rows a failed write lost (their errors records are the disk's)
        self.lost: set[str] = set()

    def expect(self, primary_id: str, count: Callable[[], None]) -> None:
        """Count conversation ``primary_id`` once its rows are written (state.counted)."""
        self.pending = (primary_id, count)

    def write(self, text: str) -> int:
        self.rows.append(text)
        return len(text)

    def flush(self) -> None:
        data = "".join(self.rows).encode("utf-8")
        primary_id = _primary_id(self.rows)
        pending, self.rows, self.pending = self.pending, [], None
        if self.failed is not None:
            self.lost.add(str(primary_id))
            raise self.failed
        if not data:
            return
        start = os.fstat(self.fd).st_size
        try:
            written = os.write(self.fd, data)
            while written < len(data):  # a short write: the next one says why
                written += os.write(self.fd, data[written:])
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, start)
            self.failed = exc
            self.lost.add(str(primary_id))
            from speculators_qwen_compat.regenerate import state

            state.write_failed(self.path, exc)
            raise
        if pending is not None and pending[0] == primary_id:
            pending[1]()


class ErrorsWriter:
    """The file object upstream's workers get for ``err_fh`` (the errors file): each record is
    one ``os.write`` to the run's errors file (its own descriptor, appending; upstream's
    buffered handle is never written, so closing it writes nothing). The record of a
    conversation whose rows a failed write lost (``RowWriter.lost``) is the disk's fault, not
    the conversation's: it is not written. A record that cannot be written is cut back off (no
    torn line), the run is told (state.write_failed) and nothing more is written; it never
    raises into upstream's worker (which would die with a traceback). A conversation is
    counted failed once its record is written, never before (``expect``, as RowWriter's)."""

    def __init__(self, path: Path, rows: RowWriter) -> None:
        self.path, self.rows = path, rows
        self.records: list[str] = []
        self.fd: int | None = None
        self.failed: OSError | None = None
        #: (primary id, how to count it) of the conversation whose record upstream writes next
        self.pending: tuple[str, Callable[[], None]] | None = None

    def expect(self, primary_id: str, count: Callable[[], None]) -> None:
        """Count conversation ``primary_id`` failed once its record is written."""
        self.pending = (primary_id, count)

    def write(self, text: str) -> int:
        self.records.append(text)
        return len(text)

    def flush(self) -> None:
        text, self.records = "".join(self.records), []
        pending, self.pending = self.pending, None
        record_id = _record_id(text) if text else None
        if not text or self.failed is not None or record_id in self.rows.lost:
            return
        data = text.encode("utf-8")
        start = 0
        try:
            if self.fd is None:
                self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            start = os.fstat(self.fd).st_size
            written = os.write(self.fd, data)
            while written < len(data):
                written += os.write(self.fd, data[written:])
        except OSError as exc:
            if self.fd is not None:
                with contextlib.suppress(OSError):
                    os.ftruncate(self.fd, start)
            self.failed = exc
            from speculators_qwen_compat.regenerate import state

            state.write_failed(self.path, exc)
            return
        if pending is not None and pending[0] == record_id:
            pending[1]()

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


def _record_id(text: str) -> str | None:
    """The conversation an errors record is about (upstream's ``id``)."""
    with contextlib.suppress(ValueError, AttributeError):
        return str(json.loads(text.split("\n", 1)[0]).get("id"))
    return None


def _primary_id(rows: list[str]) -> str | None:
    """The ``primary_id`` of the first row upstream wrote (found in its text: a row holds the
    prompt's ids, parsing it whole would cost more than the write)."""
    match = _PRIMARY_ID.search(rows[0]) if rows else None
    if match is None:
        return None
    with contextlib.suppress(ValueError):
        return str(json.loads(f'"{match.group(1)}"'))
    return None


_PRIMARY_ID = re.compile(r'"primary_id"\s*:\s*"((?:[^"\\]|\\.)*)"')


def partial_path(outfile: Path) -> Path:
    """Where upstream writes until the run ends: ``out.jsonl`` -> ``out.partial.jsonl``."""
    return outfile.with_name(f"{outfile.stem}.partial{outfile.suffix or '.jsonl'}")


def errors_path(outfile: Path) -> Path:
    """Upstream's errors file for an output file (docs/upstream.md, "Regenerate responses")."""
    return outfile.with_name(f"{outfile.stem}.errors{outfile.suffix or '.jsonl'}")


def torn_path(outfile: Path) -> Path:
    """Where a torn last line of an earlier run is kept: ``out.jsonl`` -> ``out.torn.jsonl``."""
    return outfile.with_name(f"{outfile.stem}.torn{outfile.suffix or '.jsonl'}")


@dataclass
class Output:
    """The files of one run and the lock it holds."""

    final: Path
    partial: Path
    handle: IO[bytes]
    #: the earlier output was ``--outfile`` (renamed to the partial file for the run)
    from_final: bool = False
    #: bytes of earlier rows in the partial file when the run started
    earlier: int = 0
    torn: int = 0
    #: a file appeared at ``--outfile`` during the run, so restore left the earlier rows in the
    #: partial file (both kept)
    appeared: bool = False
    #: where this run's failures are (upstream appends to the partial file's errors file;
    #: publish and restore move it beside the rows, never over a file)
    errors: Path = Path()
    #: the report could not be written (run.py says so in the run's line)
    report_failed: str = ""
    #: where the torn tail of the earlier output was set aside (``keep_torn``)
    torn_file: Path | None = None
    #: this run created the partial file (no earlier output): ``put_back`` may remove it empty
    created: bool = False
    #: what the report records of the run's settings (run.py, settings.py)
    record: dict[str, Any] = field(default_factory=dict)
    #: the run's counts once upstream runs (an interrupted run's report reads them)
    tally: Any = None
    #: conversations in the input (not_reached of a run that stops)
    rows_in: Callable[[], int] = lambda: 0

    def __post_init__(self) -> None:
        if self.errors == Path():
            self.errors = errors_path(self.partial)

    def added(self) -> bool:
        """Whether this run appended anything to the earlier rows."""
        return self.partial.exists() and self.partial.stat().st_size > self.earlier

    def release(self) -> None:
        with contextlib.suppress(OSError):
            self.handle.close()


def take(final: Path, resume: bool) -> Output:
    """Lock the run's output and make the partial file ready (module docstring). A step after
    the lock that fails (the torn tail cannot be set aside: a full disk) puts the earlier
    output back under its own name and is one line (``not_started``)."""
    output = _locked(final, resume)
    try:
        output.torn = _cut_torn_tail(output) if resume else 0
    except OSError as exc:
        earlier = output.final if output.from_final else output.partial
        raise not_started(
            output, f"cannot set aside the torn last line of {earlier}: {why(exc)}"
        ) from exc
    try:
        output.earlier = output.partial.stat().st_size
        set_aside_errors(final)  # their conversations are retried; their records are kept
    except OSError as exc:
        raise not_started(
            output, f"cannot set aside the earlier errors of {final}: {why(exc)}"
        ) from exc
    return output


def _locked(final: Path, resume: bool) -> Output:
    """The run's output, locked: a new partial file, or (``--resume``) the earlier one, the
    earlier ``--outfile`` renamed to it."""
    partial = partial_path(final)
    if not resume:
        for path, what in ((partial, "the rows of an interrupted run"),
                           (final, "the output of an earlier run")):  # fmt: skip
            if path.exists():
                _lock(path, EXISTING).close()  # a run writing it is named as such
                raise _exists(path, what)
        try:
            handle = _lock(partial, NEW)  # never appends to a file that appeared meanwhile
        except FileExistsError:
            raise _exists(partial, "the rows of an interrupted run") from None
        return Output(final, partial, handle, created=True)
    had_final, had_partial = final.exists(), partial.exists()
    if had_final and had_partial:
        _lock(partial, EXISTING).close()
        raise CompatError(
            f"both {final} and {partial} exist: keep the one to resume and remove the other"
        )
    from_final = had_final
    # a file that was there is locked where it is, never created again under its name (another
    # run may have renamed it meanwhile)
    handle = _lock(final if from_final else partial, EXISTING if had_partial or had_final else NEW)
    if from_final and not move(final, partial):  # the lock is on the file, not its name
        handle.close()
        raise CompatError(
            f"{partial} appeared while this run took {final}: another regenerate-responses run "
            "is starting on this output; wait for it to end, or give this run another --outfile"
        )
    created = not (had_final or had_partial)
    return Output(final, partial, handle, from_final=from_final, created=created)


def not_started(output: Output, what: str) -> CompatError:
    """Setting up the run failed before upstream ran (``what``: the step and why): the earlier
    output goes back under its own name (``put_back``), the lock is let go, and the one line
    says where the rows are (the error to raise)."""
    where = put_back(output)
    output.release()
    if where is None:
        rows = "no row was written"
    elif where == output.final or not output.from_final:
        rows = f"{where} is back under its own name"
    else:
        rows = f"the earlier rows are in {where} ({_appeared_meanwhile(output)})"
    if output.torn_file is not None:
        rows += f"; its torn last line ({output.torn} rows) is in {output.torn_file}"
    return CompatError(
        f"{what}; nothing was regenerated; {rows}; fix it and rerun the same command"
    )


def put_back(output: Output) -> Path | None:
    """Undo ``take`` when the run could not start: an earlier ``--outfile`` renamed to the
    partial file gets its name back (never over a file that appeared there meanwhile); a
    partial file this run created, still empty, is removed (it is this run's). Where the
    earlier rows are (None: there are none)."""
    if output.from_final and move(output.partial, output.final):
        return output.final
    if output.created:
        with contextlib.suppress(OSError):
            if not output.partial.stat().st_size:
                output.partial.unlink()
                return None
    return output.partial if output.partial.exists() else None


def _appeared_meanwhile(output: Output) -> str:
    return f"{output.final} appeared meanwhile: kept as it is"


def why(exc: BaseException) -> str:
    """An error in a few words for a one-line message: the OS's reason (and the file it names)
    for an OSError, else its type and text."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def set_aside_errors(final: Path) -> list[Path]:
    """Earlier runs' errors files (``OUT.errors.jsonl``, ``OUT.partial.errors.jsonl``) moved to
    the next free ``OUT.errors.N.jsonl`` (``set_aside``); one that holds nothing is removed. The
    errors file a run leaves then lists the failures of that run alone. Called with the run's
    lock held."""
    kept = []
    for path in (errors_path(final), errors_path(partial_path(final))):
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            continue
        if not size:
            path.unlink(missing_ok=True)
            continue
        kept.append(set_aside(path, f"{final.stem}.errors.", final.suffix or ".jsonl"))
    return kept


def set_aside(path: Path, head: str, tail: str) -> Path:
    """Move ``path`` to the next free ``HEAD N TAIL`` in its folder (N above every one there,
    so the highest is the latest), never over a file: how an earlier run's errors files and
    reports are kept (no run replaces what another wrote). Where it went."""
    number = next_number(path.parent, head, tail)
    while not move(path, path.with_name(f"{head}{number}{tail}")):
        number += 1
    return path.with_name(f"{head}{number}{tail}")


def next_number(folder: Path, head: str, tail: str) -> int:
    """One above the highest N of the files ``HEAD N TAIL`` in ``folder`` (1 when none)."""
    numbers = [0]
    for path in folder.iterdir():
        name = path.name
        if name.startswith(head) and name.endswith(tail):
            number = name[len(head) : len(name) - len(tail)]
            if number.isdigit():
                numbers.append(int(number))
    return 1 + max(numbers)


def move(source: Path, target: Path) -> bool:
    """Rename ``source`` to ``target`` unless ``target`` exists (a hard link, then the old name
    removed): never over a file. False, and nothing moved, when ``target`` exists."""
    try:
        os.link(source, target)
    except FileExistsError:
        return False
    except OSError as exc:  # a file system without hard links: a rename, the target checked
        if exc.errno not in NO_LINKS:
            raise
        if os.path.lexists(target):
            return False
        os.rename(source, target)
        return True
    source.unlink()
    return True


#: what ``os.link`` raises on a file system without hard links (FAT, some network mounts)
NO_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS}


#: how _lock opens a file: one that exists (gone: another run renamed it), or a new one
#: (FileExistsError when one is there)
EXISTING = os.O_WRONLY | os.O_APPEND
NEW = EXISTING | os.O_CREAT | os.O_EXCL


def _exists(path: Path, what: str) -> CompatError:
    return CompatError(
        f"{path} already exists ({what}); speculators would append a second copy of every row: "
        "pass --resume to regenerate only the conversations missing from it, or remove it"
    )


def _lock(path: Path, flags: int) -> IO[bytes]:
    """``path`` opened for appending (``flags``: EXISTING or NEW) with an exclusive lock, or the
    one line saying another run holds it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CompatError(
            f"cannot write {path}: its folder cannot be made ({exc.strerror or exc}); nothing "
            "was done: give --outfile a folder that can be written"
        ) from None
    try:
        handle = os.fdopen(os.open(path, flags, 0o666), "ab")
    except FileNotFoundError:  # it was there a moment ago: another run renamed it
        raise _busy(path) from None
    except FileExistsError:
        raise
    except OSError as exc:  # a read-only folder or file system
        raise CompatError(
            f"cannot write {path}: {exc.strerror or exc}; nothing was done: give --outfile a "
            "folder that can be written"
        ) from None
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        # another run may have renamed the file between open and lock: the lock must be on
        # the file that has the name now, or two runs write under one name
        if os.fstat(handle.fileno()).st_ino != path.stat().st_ino:
            raise OSError("renamed while locking")
    except OSError:
        handle.close()
        raise _busy(path) from None
    return handle


def _busy(path: Path) -> CompatError:
    return CompatError(
        f"another regenerate-responses run is writing {path} (it holds its lock); wait for it "
        "to end, or give this run another --outfile"
    )


def _cut_torn_tail(output: Output) -> int:
    """Set aside what a killed run left half written at the end of the partial file
    (torn.torn_start: the cut last line and the rows of its write): copied to a torn file of
    its own (``keep_torn``), then cut off the end; rows of other conversations are not
    touched. How many rows were set aside."""
    path = output.partial
    with path.open("rb") as file:
        keep, rows = torn.torn_start(file, path.stat().st_size)
        if not rows:
            return 0
        file.seek(keep)
        aside_bytes = file.read()
    output.torn_file = keep_torn(output.final, aside_bytes + b"\n")
    os.truncate(path, keep)
    return rows


def keep_torn(final: Path, data: bytes) -> Path:
    """Write ``data`` to a new torn file: ``out.torn.jsonl``, or when one is there (an earlier
    resume's) the next ``out.torn.N.jsonl``; never into a file that exists. A write that fails
    (a full disk) leaves no file of ours behind. Where it went."""
    head, tail = f"{final.stem}.torn.", final.suffix or ".jsonl"
    path = torn_path(final)
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            path = final.with_name(f"{head}{next_number(final.parent, head, tail)}{tail}")
            continue
        try:
            with os.fdopen(fd, "wb") as aside:
                aside.write(data)
                aside.flush()
                os.fsync(aside.fileno())
        except BaseException:
            path.unlink(missing_ok=True)  # this run's, incomplete
            raise
        return path


def publish(output: Output) -> None:
    """The run ended well: the partial file (and its errors) become ``--outfile``. Never over a
    file that appeared at ``--outfile`` (or its errors file) while the run went on (a hard link,
    not a rename, so an existing one is refused and both are kept; this run's errors then stay
    in ``output.errors``, the partial file's errors file)."""
    if not move(output.partial, output.final):
        raise CompatError(
            f"{output.final} appeared while this run wrote {output.partial}; both are kept: "
            "compare them and keep one"
        )
    if output.errors.exists() and move(output.errors, errors_path(output.final)):
        output.errors = errors_path(output.final)


def restore(output: Output) -> Path | None:
    """Nothing was added: put an earlier output back under its name, byte for byte; drop a
    partial file this run created empty. Never over a file that appeared at ``--outfile`` (or
    its errors file) while the run went on (a hard link, as publish): the earlier rows then stay
    in the partial file, both are kept and ``output.appeared`` says so. Where the earlier rows
    are (None: there are none)."""
    failures = output.errors.exists() and output.errors.stat().st_size > 0
    where: Path | None = output.partial if output.earlier or output.from_final else None
    if output.from_final:
        if move(output.partial, output.final):
            where = output.final
            if failures and move(output.errors, errors_path(output.final)):
                output.errors = errors_path(output.final)
        else:
            output.appeared = True
    elif not output.earlier:
        output.partial.unlink(missing_ok=True)
    if not failures:
        output.errors.unlink(missing_ok=True)  # this run's, empty
    return where


def drop_empty_errors(path: Path) -> None:
    """Remove an errors file that holds nothing."""
    errors = errors_path(path)
    if errors.exists() and not errors.stat().st_size:
        errors.unlink()
