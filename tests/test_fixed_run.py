"""data/account/run.py ``fixed_run``: a run's options are fixed for its block and put back after
it, so a later call in the same process (a user's script, doctor then prepare_data) inherits none
of them: not the ledger folder the run removed, not its media folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from speculators_qwen_compat.core.run import current_run
from speculators_qwen_compat.core.run_options import RUN_ENV, RunOptions, current_options
from speculators_qwen_compat.data.account import ledger
from speculators_qwen_compat.data.account.ledger import Ledger
from speculators_qwen_compat.data.account.run import fixed_run

pytestmark = pytest.mark.pure


@pytest.mark.parametrize("inherited", [None, RunOptions(unknown_roles="skip")])
def test_options_are_put_back_and_the_ledger_folder_removed(
    inherited: RunOptions | None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if inherited is None:
        monkeypatch.delenv(RUN_ENV, raising=False)
    else:
        monkeypatch.setenv(RUN_ENV, inherited.to_json())
    before = os.environ.get(RUN_ENV)
    with fixed_run(inline_media_dir=str(tmp_path / "media")) as run:
        assert current_run() is run and run.options == current_options()
        ledger = Path(run.options.ledger_dir)
        assert ledger.is_dir() and run.options.inline_media_dir == str(tmp_path / "media")
        if inherited is not None:  # the inherited options stand where the run does not set them
            assert run.options.unknown_roles == "skip"
    assert os.environ.get(RUN_ENV) == before
    assert current_run() is None and not ledger.exists()


def test_options_are_put_back_when_the_run_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RUN_ENV, raising=False)
    with pytest.raises(RuntimeError), fixed_run(strict_data=True):
        assert current_options().strict_data
        raise RuntimeError("the run failed")
    assert RUN_ENV not in os.environ and not current_options().strict_data


def test_a_second_call_under_one_run_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each call of upstream's run function under one run has a ledger of its own in the run's
    folder: closing the first leaves the folder for the second (doctor's dry run, then a call
    of upstream's run function, under one ``fixed_run``)."""
    monkeypatch.delenv(RUN_ENV, raising=False)
    with fixed_run() as run:
        for rows in (3, 5):
            counts = Ledger(str(run.options.ledger_dir))
            with ledger.batch(rows):
                pass
            assert counts.close().conversations_in == rows
        assert Path(run.options.ledger_dir).is_dir()
