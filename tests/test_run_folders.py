"""data/read/run_folders.py: a dead run's folders are swept, a live run's never, wherever the kill
landed (a forked child stands for the run: it claims and exits without releasing, as a
SIGKILLed run does; the kernel drops its locks)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

from speculators_qwen_compat.data.read import run_folders

pytestmark = pytest.mark.pure  # our code alone

PREFIX = "run-"


def _in_a_child_that_dies(work) -> None:
    """Run ``work()`` in a forked child that then exits without cleaning up."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            work()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_dead_runs_folder_is_swept_and_a_live_ones_kept(tmp_path: Path) -> None:
    _in_a_child_that_dies(lambda: (run_folders.make(tmp_path, PREFIX) / "rows").touch())
    dead = [p for p in tmp_path.iterdir() if not p.name.endswith(run_folders.LOCK_SUFFIX)]
    assert len(dead) == 1 and (dead[0] / "rows").exists()
    mine = run_folders.make(tmp_path, PREFIX)  # sweeps first
    try:
        assert not dead[0].exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == [mine.name, mine.name + ".lock"]
        assert mine.stat().st_mode & 0o777 == 0o700
        # a sweep from another run leaves the live run's folder alone (the child forgets
        # what it inherited from this process, as an unrelated run knows nothing of it)
        _in_a_child_that_dies(
            lambda: (run_folders._held.clear(), run_folders.sweep(tmp_path, PREFIX))
        )
        assert mine.is_dir() and (tmp_path / (mine.name + ".lock")).exists()
    finally:
        run_folders.release(mine)
    assert list(tmp_path.iterdir()) == []


def test_a_claim_left_by_a_kill_is_swept_once_old(tmp_path: Path) -> None:
    """A run killed between making its claim file and linking it leaves the claim (no folder:
    the folder is made only after its lock file is in place)."""
    old, young = tmp_path / ".claim-old", tmp_path / ".claim-young"
    old.touch()
    young.touch()
    past = time.time() - run_folders.CLAIM_GRACE_SECONDS - 5
    os.utime(old, (past, past))
    run_folders.sweep(tmp_path, PREFIX)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".claim-young"]


def test_names_are_not_reused(tmp_path: Path) -> None:
    folders = [run_folders.make(tmp_path, PREFIX) for _ in range(20)]
    try:
        assert len(set(folders)) == 20
        assert not list(tmp_path.glob(".claim-*"))
    finally:
        for folder in folders:
            run_folders.release(folder)


def test_a_dead_runs_registered_folder_is_swept_by_any_registered_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A registered folder (staged output beside --output A) of a dead run is swept by the next
    registered make, whatever its parent and prefix (--output B elsewhere); the registry keeps
    a link per live folder only."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    a, b = tmp_path / "a", tmp_path / "b"
    _in_a_child_that_dies(lambda: (run_folders.make(a, ".A.incomplete-", True) / "x").touch())
    (dead,) = [p for p in a.iterdir() if p.is_dir()]
    book = run_folders.registry()
    assert book is not None and len(list(book.iterdir())) == 1
    mine = run_folders.make(b, ".B.incomplete-", registered=True)
    try:
        assert not dead.exists() and list(a.iterdir()) == []
        (entry,) = book.iterdir()
        assert Path(os.readlink(entry)) == b / (mine.name + run_folders.LOCK_SUFFIX)
        # another run's sweep keeps the live run's registered folder
        _in_a_child_that_dies(lambda: (run_folders._held.clear(), run_folders.sweep_registered()))
        assert mine.is_dir() and entry.is_symlink()
    finally:
        run_folders.release(mine)
    assert list(book.iterdir()) == [] and list(b.iterdir()) == []
