"""The record beside a drafter and what doctor's verdict makes of it, without training: a
--save-path that would overwrite --from-pretrained, fine-tuning from a mis-scaled drafter, a
norm the record could not read, weights loaded from anywhere, a resumed run, a stale record.

Records are written as the trained_record fix writes them; the runs themselves are in
tests/test_fine_tune_drafter.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from speculators_qwen_compat.cli import train
from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.fixes.training import trained_record as tr
from speculators_qwen_compat.training import drafter_record as dr
from speculators_qwen_compat.training import norm_convention as nc
from speculators_qwen_compat.training import norm_verdict as nv

ONE_PLUS, TIMES = nc.ONE_PLUS_WEIGHT, nc.TIMES_WEIGHT


def _record(steps: int, source: str | None = None, norm: str | None = ONE_PLUS,
            kind: str = "dflash", release: str = "0.9.0") -> dict:  # fmt: skip
    weights: dict = {"kind": dr.LOADED if source else dr.BUILT, "trained_steps": steps}
    if source:
        weights["source"] = "out/dflash/0"
        weights["source_verdict"] = {"word": source, "why": "its release built x*w"}
    return {
        "speculators_version": release, "speculators_model_type": kind,
        "verifier_types": ["qwen3_5_moe_text", "qwen3_5_moe"], "verifier_convention": ONE_PLUS,
        "verifier_norm": norm, "weights": weights,
    }  # fmt: skip


def _folder(path: Path, weights: bytes = b"weights") -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    (path / dr.WEIGHTS_FILE).write_bytes(weights)
    return path


# 1. --save-path against --from-pretrained


@pytest.mark.parametrize(
    ("save", "source", "how"),
    [
        ("out/dflash/0", "out/dflash/0", "is"),
        ("out/dflash", "out/dflash/0", "holds"),
        ("out/dflash", "out/dflash/checkpoint_best", "holds"),  # the link followed
        ("out/dflash/0/more", "out/dflash/0", "lies inside"),
    ],
)
def test_save_path_over_its_source_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture, save: str,
                                              source: str, how: str) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    _folder(tmp_path / "out" / "dflash" / "0")
    (tmp_path / "out" / "dflash" / "checkpoint_best").symlink_to("0")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    code = train.main(["--save-path", save, f"--from-pretrained={source}", "--epochs", "1"])
    assert code != 0
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1, error
    assert error[0].startswith(f"speculators_qwen_compat: error: --save-path {save} {how} ")
    assert f"--from-pretrained {source}" in error[0]
    assert error[0].endswith("choose a new --save-path (e.g. out/dflash-finetuned)")
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_save_path_elsewhere_passes(tmp_path: Path) -> None:
    _folder(tmp_path / "out" / "dflash" / "0")
    source = str(tmp_path / "out" / "dflash" / "0")
    for save in (tmp_path / "out" / "dflash-finetuned", tmp_path / "out" / "dflash" / "1"):
        train.check_save_path(["--save-path", str(save), "--from-pretrained", source])
    train.check_save_path(["--save-path", str(tmp_path), "--from-pretrained", "org/drafter"])
    with pytest.raises(CompatError):
        train.check_save_path(["--save-path", str(tmp_path), "--from-pretrained", source])


def test_plain_trainer_is_stopped_before_the_build(tmp_path: Path) -> None:
    """``python -m speculators.train`` (the fixes on through the venv's .pth): fine_tune_dtype's
    wrapper refuses before the drafter is built, trained or its epochs cleaned up."""
    from speculators_qwen_compat.fixes.training import fine_tune_dtype

    source = str(_folder(tmp_path / "out" / "dflash" / "0"))
    built = []

    def build_draft_model(args: object, model_class: object = None) -> object:
        built.append(args)
        return None

    args = SimpleNamespace(save_path=str(tmp_path / "out" / "dflash"), from_pretrained=source)
    with pytest.raises(CompatError, match="choose a new --save-path"):
        fine_tune_dtype._build_draft_model(build_draft_model, None, (args,), {})
    assert built == []


# 2. fine-tuned from a mis-scaled drafter


def test_fine_tuned_from_mis_scaled_is_unknown() -> None:
    verdict = nv.judge({}, _record(40, source=nv.MIS_SCALED))
    assert verdict.word == nv.UNKNOWN
    assert verdict.why.startswith(
        "fine-tuned 40 steps from a drafter that learned mis-scaled targets: its norm is right "
        "now; whether 40 steps undid what it learned is not measured (retraining is the known "
        "answer)"
    )


def test_fine_tuned_from_right_stays_right() -> None:
    verdict = nv.judge({}, _record(40, source=nv.RIGHT))
    assert verdict.word == nv.RIGHT
    assert nv.judge({}, _record(40)).word == nv.RIGHT  # built here
    assert nv.judge({}, _record(40, source=nv.UNKNOWN)).word == nv.UNKNOWN


# 3. no verifier_norm, or one whose convention was unreadable


def test_unreadable_norm_is_recorded_and_unknown(caplog: pytest.LogCaptureFixture) -> None:
    import torch

    assert tr.norm_convention(None) is None
    assert tr.norm_convention(torch.nn.Linear(4, 4)) == dr.UNREADABLE
    assert "unreadable" in caplog.text
    verdict = nv.judge({}, _record(40, norm=dr.UNREADABLE))
    assert verdict.word == nv.UNKNOWN and "could not be read" in verdict.why


def test_missing_norm_is_right_only_where_upstream_builds_none() -> None:
    assert nv.judge({}, _record(40, norm=None, kind="mtp")).word == nv.RIGHT
    assert nv.judge({}, _record(40, norm=None, release="0.5.0")).word == nv.RIGHT  # no norm
    verdict = nv.judge({}, _record(40, norm=None))
    assert verdict.word == nv.UNKNOWN and "builds one" in verdict.why


# 4. wherever from_pretrained loaded weights from, and a resumed run


def _loaded(path: str) -> nv.NormVerdict:
    model = SimpleNamespace(config=None)
    assert tr._from_pretrained(lambda *a, **k: model, None, (path,), {}) is model
    return getattr(model, tr.SOURCE)[1]


def test_bin_weights_source_is_recorded(tmp_path: Path) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "pytorch_model.bin").write_bytes(b"weights")
    dr.write(folder, _record(40, norm=TIMES))  # learned x*w for an x*(1+w) verifier
    assert _loaded(str(folder)).word == nv.MIS_SCALED


def test_hub_and_unjudged_sources_are_unknown(tmp_path: Path) -> None:
    assert _loaded("org/drafter-not-here").word == nv.UNKNOWN
    folder = _folder(tmp_path / "broken")
    (folder / "config.json").write_text("{not json")
    verdict = _loaded(str(folder))
    assert verdict.word == nv.UNKNOWN and "not judged" in verdict.why
    config_only = tmp_path / "config-only"
    config_only.mkdir()
    (config_only / "config.json").write_text("{}")
    model = SimpleNamespace(config=None)
    tr._from_pretrained(lambda *a, **k: model, None, (str(config_only),), {})
    assert not hasattr(model, tr.SOURCE)  # fresh weights: built


def test_resumed_run_is_recorded(tmp_path: Path) -> None:
    def trainer(resume: bool) -> SimpleNamespace:
        checkpointer = SimpleNamespace(path=tmp_path, previous_epoch=1)
        return SimpleNamespace(resume_from_checkpoint=resume, checkpointer=checkpointer)

    assert tr.resumed_from(trainer(False)) is None
    _folder(tmp_path / "1")
    folder, verdict = tr.resumed_from(trainer(True))
    assert folder == str(tmp_path / "1") and verdict.word == nv.UNKNOWN
    dr.write(tmp_path / "1", _record(40))
    assert tr.resumed_from(trainer(True))[1].word == nv.RIGHT
    record = _record(80, source=nv.UNKNOWN)
    record["weights"]["kind"] = dr.RESUMED
    assert nv.judge({}, record).word == nv.UNKNOWN


# 5. the record is bound to its weights


def test_record_of_other_weights_is_ignored(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "d")
    dr.write(folder, _record(40))
    assert dr.read(folder) is not None and dr.ignored_because(folder) is None
    binding = json.loads((folder / dr.RECORD_FILE).read_text())["weights_file"]
    assert binding["size"] == len(b"weights") and len(binding["sha256"]) == 64
    (folder / dr.WEIGHTS_FILE).write_bytes(b"weights saved later")
    assert dr.read(folder) is None
    assert "other weights" in dr.ignored_because(folder)
    assert nv.judge({}, dr.read(folder)).word == nv.UNKNOWN  # the release table: none recorded


def test_failed_write_leaves_no_older_record(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "d")
    dr.write(folder, _record(40))
    with pytest.raises(TypeError):
        dr.write(folder, {"weights": object()})
    assert not (folder / dr.RECORD_FILE).exists()
    assert not list(folder.glob(dr.RECORD_FILE + "*"))
