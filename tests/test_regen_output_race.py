"""regenerate/output.py: no run deletes or replaces a file an earlier run (or another process)
wrote. The final rename never replaces a file that appeared at --outfile during the run (a second
run, or a user's copy); both files are kept and the run says so. Earlier errors files are set
aside as OUT.errors.N.jsonl (docs/regenerate-responses.md "Resume and the lock")."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.regenerate import output as files
from speculators_qwen_compat.regenerate import run as regen_run
from speculators_qwen_compat.regenerate.tally import RegenTally


def test_publish_keeps_an_outfile_that_appeared_during_the_run(tmp_path: Path) -> None:
    final = tmp_path / "out.jsonl"
    run = files.take(final, resume=False)
    run.handle.write(b'{"id": "new"}\n')
    run.handle.flush()
    final.write_bytes(b'{"id": "other run"}\n')  # written by someone else meanwhile
    with pytest.raises(CompatError, match="appeared while this run"):
        files.publish(run)
    assert final.read_bytes() == b'{"id": "other run"}\n'
    assert run.partial.read_bytes() == b'{"id": "new"}\n'
    run.release()


def test_publish_renames_when_outfile_is_absent(tmp_path: Path) -> None:
    final = tmp_path / "out.jsonl"
    run = files.take(final, resume=False)
    run.handle.write(b'{"id": "new"}\n')
    run.handle.flush()
    files.publish(run)
    assert final.read_bytes() == b'{"id": "new"}\n'
    assert not run.partial.exists()
    run.release()


# --- no run deletes or replaces what an earlier run (or another process) wrote: the errors
# files are set aside under numbered names, never deleted or renamed over ---

EARLIER = b'{"id": "a", "error": "HTTP 504 after every retry"}\n'


def _set_aside(tmp_path: Path) -> dict[str, bytes]:
    """The numbered errors files an earlier run's records are kept in, by name."""
    return {p.name: p.read_bytes() for p in sorted(tmp_path.glob("out.errors.*.jsonl"))}


def test_resume_keeps_the_earlier_errors_when_the_run_stops(tmp_path: Path) -> None:
    final = tmp_path / "out.jsonl"
    final.write_bytes(b'{"id": "b"}\n')
    (tmp_path / "out.errors.jsonl").write_bytes(EARLIER)
    run = files.take(final, resume=True)
    # the server dies before conversation "a" is retried: nothing added, nothing failed
    assert files.restore(run) == final
    run.release()
    assert final.read_bytes() == b'{"id": "b"}\n'
    assert _set_aside(tmp_path) == {"out.errors.1.jsonl": EARLIER}
    assert not (tmp_path / "out.errors.jsonl").exists()  # this run had no failure


def test_resume_of_a_partial_file_keeps_its_errors_and_the_older_ones(tmp_path: Path) -> None:
    final = tmp_path / "out.jsonl"
    (tmp_path / "out.partial.jsonl").write_bytes(b'{"id": "b"}\n')
    (tmp_path / "out.partial.errors.jsonl").write_bytes(b'{"id": "c"}\n')
    (tmp_path / "out.errors.1.jsonl").write_bytes(EARLIER)  # set aside by a run before
    run = files.take(final, resume=True)
    assert not (tmp_path / "out.partial.errors.jsonl").exists()  # upstream starts this run's
    run.release()
    assert _set_aside(tmp_path) == {
        "out.errors.1.jsonl": EARLIER,
        "out.errors.2.jsonl": b'{"id": "c"}\n',
    }


def test_a_fresh_run_publishes_its_own_errors_and_keeps_a_stale_one(tmp_path: Path) -> None:
    final = tmp_path / "out.jsonl"
    (tmp_path / "out.errors.jsonl").write_bytes(EARLIER)  # its output was removed, not this
    run = files.take(final, resume=False)
    run.handle.write(b'{"id": "b"}\n')
    run.handle.flush()
    (tmp_path / "out.partial.errors.jsonl").write_bytes(b'{"id": "c"}\n')  # upstream's append
    files.publish(run)
    run.release()
    assert final.read_bytes() == b'{"id": "b"}\n'
    assert (tmp_path / "out.errors.jsonl").read_bytes() == b'{"id": "c"}\n'
    assert _set_aside(tmp_path) == {"out.errors.1.jsonl": EARLIER}


def test_publish_keeps_an_errors_file_that_appeared_during_the_run(tmp_path: Path) -> None:
    final = tmp_path / "out.jsonl"
    run = files.take(final, resume=False)
    run.handle.write(b'{"id": "b"}\n')
    run.handle.flush()
    (tmp_path / "out.partial.errors.jsonl").write_bytes(b'{"id": "c"}\n')
    (tmp_path / "out.errors.jsonl").write_bytes(b"someone else's\n")  # meanwhile
    files.publish(run)
    run.release()
    assert final.read_bytes() == b'{"id": "b"}\n'
    assert (tmp_path / "out.errors.jsonl").read_bytes() == b"someone else's\n"
    assert (tmp_path / "out.partial.errors.jsonl").read_bytes() == b'{"id": "c"}\n'  # this run's


def test_the_run_names_where_its_failures_are_when_the_errors_name_was_taken(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    final = tmp_path / "out.jsonl"
    run = files.take(final, resume=False)
    run.handle.write(b'{"id": "b"}\n')
    run.handle.flush()
    (tmp_path / "out.partial.errors.jsonl").write_bytes(b'{"id": "c"}\n')
    (tmp_path / "out.errors.jsonl").write_bytes(b"someone else's\n")  # meanwhile
    tally = RegenTally(conversations_in=2, regenerated=1, rows_out=1)
    tally.failed["HTTP 504 after every retry"] = 1
    regen_run._finish(run, tally)
    run.release()
    assert (tmp_path / "out.errors.jsonl").read_bytes() == b"someone else's\n"
    report = json.loads((tmp_path / "out.jsonl.report.json").read_text())
    assert report["errors_file"] == str(tmp_path / "out.partial.errors.jsonl")
    assert f"each failure is in {tmp_path / 'out.partial.errors.jsonl'}" in capsys.readouterr().out


@pytest.mark.parametrize("failures", [b"", b'{"id": "c"}\n'])
def test_restore_keeps_an_outfile_that_appeared_during_the_run(
    tmp_path: Path, failures: bytes
) -> None:
    final = tmp_path / "out.jsonl"
    final.write_bytes(b'{"id": "b"}\n')
    run = files.take(final, resume=True)
    (tmp_path / "out.partial.errors.jsonl").write_bytes(failures)
    final.write_bytes(b"someone else's\n")  # meanwhile
    (tmp_path / "out.errors.jsonl").write_bytes(b"someone else's errors\n")
    where = files.restore(run)
    run.release()
    assert final.read_bytes() == b"someone else's\n"
    assert (tmp_path / "out.errors.jsonl").read_bytes() == b"someone else's errors\n"
    assert where == run.partial and run.partial.read_bytes() == b'{"id": "b"}\n'
    if failures:
        assert (tmp_path / "out.partial.errors.jsonl").read_bytes() == failures


def test_the_run_says_the_outfile_appeared_and_where_the_earlier_rows_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    final = tmp_path / "out.jsonl"
    final.write_bytes(b'{"id": "b"}\n')
    run = files.take(final, resume=True)
    final.write_bytes(b"someone else's\n")  # meanwhile
    with pytest.raises(CompatError, match="appeared while this run went on") as refused:
        regen_run._finish(run, RegenTally(conversations_in=1, resumed=1))
    run.release()
    assert final.read_bytes() == b"someone else's\n"
    assert (tmp_path / "out.partial.jsonl").read_bytes() == b'{"id": "b"}\n'
    assert f"the earlier rows are in {tmp_path / 'out.partial.jsonl'}" in str(refused.value)
    report = json.loads((tmp_path / "out.jsonl.report.json").read_text())
    assert report["exit_code"] == 1 and report["output"] == str(tmp_path / "out.partial.jsonl")


def test_resume_never_renames_the_outfile_over_a_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second --resume saw ``out.jsonl`` just before the first renamed it to the partial
    file: it must not create an empty ``out.jsonl`` and rename it over the first's rows."""
    final = tmp_path / "out.jsonl"
    final.write_bytes(b'{"id": "b"}\n')
    lock = files._lock

    def first_run_renames_meanwhile(path: Path, *flags: int) -> object:
        if final.exists():
            final.rename(tmp_path / "out.partial.jsonl")
        return lock(path, *flags)

    monkeypatch.setattr(files, "_lock", first_run_renames_meanwhile)
    with pytest.raises(CompatError, match="another regenerate-responses run"):
        files.take(final, resume=True)
    assert (tmp_path / "out.partial.jsonl").read_bytes() == b'{"id": "b"}\n'
    assert not final.exists()


def test_a_fresh_run_never_appends_to_a_partial_file_that_appeared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another run created ``out.partial.jsonl`` after this one saw no such file: this run is
    refused and never appends to its rows."""
    final = tmp_path / "out.jsonl"
    partial = tmp_path / "out.partial.jsonl"
    lock = files._lock

    def other_run_starts_meanwhile(path: Path, *flags: int) -> object:
        if not partial.exists():
            partial.write_bytes(b'{"id": "other"}\n')
        return lock(path, *flags)

    monkeypatch.setattr(files, "_lock", other_run_starts_meanwhile)
    with pytest.raises(CompatError, match="already exists"):
        files.take(final, resume=False)
    assert partial.read_bytes() == b'{"id": "other"}\n'


def test_the_report_says_where_the_rows_are_when_the_outfile_appeared(tmp_path: Path) -> None:
    final = tmp_path / "out.jsonl"
    report = tmp_path / "out.jsonl.report.json"
    report.write_text('{"exit_code": 0, "output": "out.jsonl"}\n')  # an earlier run's
    run = files.take(final, resume=False)
    run.handle.write(b'{"id": "new"}\n')
    run.handle.flush()
    final.write_bytes(b'{"id": "other run"}\n')  # written by someone else meanwhile
    with pytest.raises(CompatError, match="appeared while this run"):
        regen_run._finish(run, RegenTally(conversations_in=1, regenerated=1, rows_out=1))
    run.release()
    written = json.loads(report.read_text())
    assert written["exit_code"] == 1 and written["output"] == str(run.partial)
    assert run.partial.read_bytes() == b'{"id": "new"}\n'


@pytest.mark.parametrize("refusal", [errno.EPERM, errno.EXDEV, errno.EOPNOTSUPP])
def test_a_file_system_without_hard_links_resumes_and_publishes_by_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refusal: int
) -> None:
    def no_links(source: object, target: object) -> None:
        raise OSError(refusal, os.strerror(refusal))

    monkeypatch.setattr(os, "link", no_links)
    final = tmp_path / "out.jsonl"
    final.write_bytes(b'{"id": "a"}\n')
    run = files.take(final, resume=True)
    assert not final.exists() and run.partial.read_bytes() == b'{"id": "a"}\n'
    run.handle.write(b'{"id": "b"}\n')
    run.handle.flush()
    files.publish(run)
    run.release()
    assert final.read_bytes() == b'{"id": "a"}\n{"id": "b"}\n' and not run.partial.exists()
    other = tmp_path / "other.jsonl"
    other.write_bytes(b"kept\n")
    final.write_bytes(b"source\n")
    assert not files.move(final, other)  # never over a file, without links too
    assert other.read_bytes() == b"kept\n" and final.read_bytes() == b"source\n"


@pytest.mark.parametrize("where", ["read-only", "not a folder"])
def test_an_output_folder_that_cannot_be_written_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:  # fmt: skip
    import asyncio

    if where == "read-only":
        folder = tmp_path / "ro"
        folder.mkdir()
        opener = os.open

        def read_only(path: object, *args: object, **kwargs: object) -> int:
            if str(path).startswith(str(folder)):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
            return opener(path, *args, **kwargs)

        monkeypatch.setattr(os, "open", read_only)
    else:
        (tmp_path / "file").write_text("x")
        folder = tmp_path / "file" / "sub"

    async def upstream_run(*, endpoint: str, model: str, dataset_name: str, outfile: str,
                           resume: bool, max_tokens: int, limit: object) -> None:  # fmt: skip
        raise AssertionError("upstream must not run")

    kwargs = {"endpoint": "http://x/v1/chat/completions", "model": "m",
              "dataset_name": "d.jsonl", "outfile": str(folder / "out.jsonl"), "resume": False,
              "max_tokens": 10, "limit": None}  # fmt: skip
    with pytest.raises(SystemExit) as ended:
        asyncio.run(regen_run.guarded_run(upstream_run, (), kwargs, object()))
    assert ended.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("speculators_qwen_compat: error: cannot write ")


def test_outputs_differing_only_in_their_suffix_have_reports_of_their_own(tmp_path: Path) -> None:
    """``out.jsonl`` and ``out.json`` in one folder: each run's report names its own output
    (the report is named after the whole file name: ``out.jsonl.report.json``)."""
    for name in ("out.jsonl", "out.json"):
        run = files.take(tmp_path / name, resume=False)
        run.handle.write(b'{"id": "new"}\n')
        run.handle.flush()
        regen_run._finish(run, RegenTally(conversations_in=1, regenerated=1, rows_out=1))
        run.release()
    for name in ("out.jsonl", "out.json"):
        report = json.loads((tmp_path / f"{name}.report.json").read_text())
        assert report["output"] == str(tmp_path / name)


def test_earlier_reports_are_set_aside_numbered_never_replaced(tmp_path: Path) -> None:
    """Each run sets the report before it aside as ``OUTFILE.report.N.json`` (the errors
    files' way): a third run never replaces the first run's report."""
    final = tmp_path / "out.jsonl"
    report = tmp_path / "out.jsonl.report.json"
    for run in (1, 2, 3):
        regen_run.set_report_aside(final)
        assert not report.exists()
        report.write_text(f'{{"run": {run}}}\n')
    kept = {p.name: p.read_text() for p in sorted(tmp_path.glob("out.jsonl.report.*.json"))}
    assert kept == {
        "out.jsonl.report.1.json": '{"run": 1}\n',
        "out.jsonl.report.2.json": '{"run": 2}\n',
    }


def _resumed(final: Path, module: object) -> int:
    """A --resume run on ``final`` through regenerate/run.py whose upstream must not be reached
    (setting up the resume fails first); its exit code."""
    import asyncio

    async def upstream_run(*, endpoint: str, model: str, dataset_name: str, outfile: str,
                           resume: bool, max_tokens: int, limit: object) -> None:  # fmt: skip
        raise AssertionError("upstream must not run")

    kwargs = {"endpoint": "http://x/v1/chat/completions", "model": "m",
              "dataset_name": "d.jsonl", "outfile": str(final), "resume": True,
              "max_tokens": 10, "limit": None}  # fmt: skip
    with pytest.raises(SystemExit) as ended:
        asyncio.run(regen_run.guarded_run(upstream_run, (), kwargs, module))
    return int(ended.value.code or 0)


def test_a_torn_tail_that_cannot_be_set_aside_puts_the_earlier_output_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The disk is full when --resume copies a torn tail aside: the earlier output goes back
    under its own name, byte for byte, no half torn file is left, and the run is one line."""
    final = tmp_path / "out.jsonl"
    earlier = b'{"id": "a_gen0", "primary_id": "a"}\n{"id": "b_gen0", "prim'
    final.write_bytes(earlier)

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    assert _resumed(final, object()) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"speculators_qwen_compat: error: cannot set aside the torn last line of {final}"
    ), err
    assert os.strerror(errno.ENOSPC) in err[0] and f"{final} is back under its own name" in err[0]
    assert final.read_bytes() == earlier
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]
