"""regenerate/output.py: the final rename never replaces a file that appeared at --outfile
during the run (a second run, or a user's copy); both files are kept and the run says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.regenerate import output as files


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
