"""Runs that are killed or refused leave nothing that looks like a dataset, and nothing behind.

Every release. The faults are placed by tests/programs/fault_driver.py at exact points (no timing):
SIGKILL of the run's whole process group before the map, during it (a map worker has counted
1,000 rows) and after it (the dataset written, not yet in place); a refused run (--strict-data,
and the error limit: more than three conversations failing with a bug) with an explicit
--token-freq-path outside --output. The oracle is the file system: --output must not exist
after any of them; each killed run's scratch folders (the output being written beside
--output, the rows under datasets' cache, the skip ledger) are swept by the next run, and a
run after the kills, with another --output in another folder, sweeps the last killed run's
staged output (killed mid-map) too, succeeds and leaves no scratch folder at all.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    RELEASE,
    good_rows,
    last_line,
    prepare_args,
    read_report,
    run_prepare,
    run_program,
    write_dataset,
)
from packaging.version import Version

from speculators_qwen_compat.core.errors import DEBUG_ENV

#: the last one is mid-map: the run after it writes another --output and must sweep its folder
KILL_POINTS = ("before-map", "after-map", "during-map")
#: one map worker: its first counted batch (1,000 rows, upstream's map batch size) is mid-map
ROWS = 1100
ROWS_CACHE = "speculators_qwen_compat_rows"  # data/read/files.py CACHE_FOLDER


def _drive(runs: list[dict[str, Any]], tmp: Path) -> subprocess.CompletedProcess:
    """programs/fault_driver.py in a process group of its own, with its own datasets cache and
    TMPDIR.

    TMPDIR is ``tmp/tmp`` reached through a short link in the system's temporary folder:
    pytest's folders can be too deep for the map workers' socket (cli/worker_sockets.py)."""
    (tmp / "tmp").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sqc-fault-") as short:
        link = Path(short) / "t"
        link.symlink_to(tmp / "tmp")
        # DEBUG_ENV: a fatal error's traceback on stderr too, for a failure's message
        return run_program(
            "fault_driver", json.dumps(runs), new_session=True,
            HF_DATASETS_CACHE=str(tmp / "hf"), TMPDIR=str(link), **{DEBUG_ENV: "1"},
        )  # fmt: skip


def _scratch(tmp: Path, output: Path) -> dict[str, list[str]]:
    """The scratch folders and lock files a run may leave: name -> sorted file names."""
    places = {
        "staged output": (output.parent, f".{output.name}.incomplete-*"),
        "rows": (tmp / "hf" / ROWS_CACHE, "run-*"),
        "ledger": (tmp / "tmp", "sqc-ledger-*"),
        "registry": (tmp / "tmp", "sqc-run-folders-*/*"),
    }
    return {
        what: sorted(p.name for p in folder.glob(pattern)) if folder.exists() else []
        for what, (folder, pattern) in places.items()
    }


@pytest.fixture(scope="module")
def killed(qwen36_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("killed")
    data = write_dataset(tmp / "d.jsonl", good_rows(ROWS))
    output = tmp / "out"
    args = prepare_args(qwen36_dir, output, data, workers=1)
    kills = {}
    for point in KILL_POINTS:
        run = _drive([{"args": args, "kill_at": point}], tmp)
        kills[point] = (run, output.exists(), _scratch(tmp, output))
    other = tmp / "elsewhere" / "other-out"  # another name in another folder
    after = _drive([{"args": prepare_args(qwen36_dir, other, data, workers=1)}], tmp)
    return {
        "kills": kills,
        "after": after,
        "output": output,
        "other": other,
        "scratch": _scratch(tmp, output),
        "other scratch": _scratch(tmp, other),
    }


@pytest.mark.parametrize("point", KILL_POINTS)
def test_a_killed_run_leaves_no_output(killed: dict[str, Any], point: str) -> None:
    run, output_exists, scratch = killed["kills"][point]
    assert run.returncode == -signal.SIGKILL, run.stderr[-3000:]
    assert not output_exists
    # its own scratch folders are there (the sweep below has something to do), one of each
    # kind and its lock (the ledger folder is the run's until it ends): the previous killed
    # run's were swept when this one started
    assert len(scratch.pop("registry")) == 1  # its staged output, listed
    for what, names in scratch.items():
        folders = [n for n in names if not n.endswith(".lock")]
        assert len(folders) == 1, (what, names)
        assert names == sorted([folders[0], folders[0] + ".lock"]), (what, names)


def test_the_next_run_sweeps_whatever_its_output(killed: dict[str, Any]) -> None:
    """The run after the kills writes another --output elsewhere: the killed runs' staged
    output beside the first --output is swept all the same (the registry in $TMPDIR)."""
    after, output, other = killed["after"], killed["output"], killed["other"]
    assert after.returncode == 0, after.stderr[-3000:]
    assert json.loads(after.stdout.strip().splitlines()[-1]) == [0]
    report = read_report(other)
    assert (report["conversations_in"], report["conversations_kept"]) == (ROWS, ROWS)
    assert (other / "dataset_info.json").is_file()
    assert other.stat().st_mode & 0o777 == 0o777 & ~_umask()  # as a plain mkdir makes it
    assert not output.exists()
    nothing = {"staged output": [], "rows": [], "ledger": [], "registry": []}
    assert killed["scratch"] == killed["other scratch"] == nothing
    # the last killed run's folders are different from its predecessors': swept, not reused
    seen = [tuple(k[2]["rows"]) for k in killed["kills"].values()]
    assert len(set(seen)) == len(seen)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _freq_flags(freq: Path) -> list[str]:
    """An explicit --token-freq-path outside --output, and the flag that makes 0.9.0 write one
    (its default is --skip-token-freq)."""
    flags = ["--token-freq-path", str(freq)]
    return flags + (["--no-skip-token-freq"] if Version("0.9") <= RELEASE else [])


def test_a_refused_run_writes_nothing(qwen36_dir: Path, tmp_path: Path) -> None:
    rows = good_rows(12)
    duplicated = write_dataset(tmp_path / "dup.jsonl", rows + rows[:4])
    bugs = [
        {"messages": [{"role": "user", "content": f"INJECT-BUG {n}"},
                      {"role": "assistant", "content": "ok"}]}
        for n in range(4)
    ]  # fmt: skip
    buggy = write_dataset(tmp_path / "bug.jsonl", rows + bugs)
    strict_out, bug_out = tmp_path / "strict", tmp_path / "bug"
    runs = [
        {"args": prepare_args(qwen36_dir, strict_out, duplicated, workers=1,
                              extra=("--strict-data", *_freq_flags(tmp_path / "f1.pt")))},
        {"args": prepare_args(qwen36_dir, bug_out, buggy, workers=1,
                              extra=tuple(_freq_flags(tmp_path / "f2.pt"))),
         "bug": "INJECT-BUG"},
    ]  # fmt: skip
    ran = _drive(runs, tmp_path)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert json.loads(ran.stdout.strip().splitlines()[-1]) == [1, 1]
    errors = [line for line in ran.stderr.splitlines() if "speculators_qwen_compat: error:" in line]
    assert len(errors) == 2, ran.stderr[-3000:]
    assert errors[0].startswith("speculators_qwen_compat: error: --strict-data: "), ran.stderr
    assert "exact duplicate conversations" in errors[0]
    assert errors[1].startswith(
        "speculators_qwen_compat: error: 4 of 16 conversations failed with an error that is "
        "not a data problem"
    ), errors[1]
    for output, freq in ((strict_out, "f1.pt"), (bug_out, "f2.pt")):
        assert not output.exists()
        assert not (tmp_path / freq).exists()
        assert _scratch(tmp_path, output)["staged output"] == []
    assert last_line(ran.stderr) == errors[1]


#: an --overwrite run killed as it puts its dataset in place: before the swap, after it
COMMIT_POINTS = ("commit-before-swap", "commit-after-swap")


@pytest.fixture(scope="module")
def killed_commits(qwen36_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Per point: a dataset of 12 conversations in --output, an --overwrite run over it with
    30 killed at that point, then a run writing another --output (it sweeps the dead runs'
    folders); what --output held after the kill and after the sweep."""
    from datasets import load_from_disk

    tmp = tmp_path_factory.mktemp("commits")
    old = write_dataset(tmp / "old.jsonl", good_rows(12, seed=5))
    new = write_dataset(tmp / "new.jsonl", good_rows(30, seed=6))
    found: dict[str, Any] = {}
    for point in COMMIT_POINTS:
        output = tmp / point
        first = _drive([{"args": prepare_args(qwen36_dir, output, old, workers=1)}], tmp)
        assert first.returncode == 0, first.stderr[-3000:]
        again = prepare_args(qwen36_dir, output, new, workers=1, extra=("--overwrite",))
        run = _drive([{"args": again, "kill_at": point}], tmp)
        held = read_report(output)["conversations_in"], len(load_from_disk(str(output)))
        later = _drive([{"args": prepare_args(qwen36_dir, tmp / "x" / point, old, workers=1)}], tmp)
        assert later.returncode == 0, later.stderr[-3000:]
        swept = read_report(output)["conversations_in"], len(load_from_disk(str(output)))
        found[point] = run.returncode, held, swept, _scratch(tmp, output)["staged output"]
    return found


@pytest.mark.pure  # cli/staged_output.py: the same commit on every release's path
@pytest.mark.parametrize("point", COMMIT_POINTS)
def test_a_run_killed_while_replacing_its_output_leaves_one_whole_dataset(
    killed_commits: dict[str, Any], point: str
) -> None:
    """The old dataset until the swap, the new one from it: --output is never missing or a
    mix, and the next run's sweep takes nothing from it."""
    code, held, swept, staged = killed_commits[point]
    assert code == -signal.SIGKILL
    conversations = 12 if point == "commit-before-swap" else 30
    assert held[0] == conversations and held[1] > 0
    assert swept == held
    assert staged == []


@pytest.mark.pure  # cli/staged_output.py, before any release code runs
def test_a_second_run_on_the_same_output_is_refused_while_the_first_writes(
    qwen36_dir: Path, tmp_path: Path
) -> None:
    """A live run's staging folder beside --output (held here as a run holds it): another run
    on that --output refuses in one line and writes nothing; once it ends, the run goes."""
    from speculators_qwen_compat.cli.staged_output import staging_prefix
    from speculators_qwen_compat.data.read import run_folders

    data = write_dataset(tmp_path / "d.jsonl", good_rows(6))
    output = tmp_path / "out"
    held = run_folders.make(tmp_path, staging_prefix(output))
    try:
        refused = run_prepare(*prepare_args(qwen36_dir, output, data, workers=1))
    finally:
        run_folders.release(held)
    assert refused.returncode != 0
    line = last_line(refused.stderr)
    assert line.startswith("speculators_qwen_compat: error: another prepare_data run is writing")
    assert not output.exists()
    ran = run_prepare(*prepare_args(qwen36_dir, output, data, workers=1))
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert read_report(output)["conversations_kept"] == 6
