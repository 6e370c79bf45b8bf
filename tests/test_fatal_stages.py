"""A library's fatal error during prepare_data is one line naming the stage it stopped in and the
next step (cli/fatal_stage.py), never the library's message alone: per class, raised by the
library where it raises it.

- loading: a Qwen3.6 checkpoint (composite config + processor files) on this base venv, which
  has no torchvision: 0.6+ load its processor through transformers, whose error names the
  missing packages (0.5 loads a tokenizer and runs);
- loading: the same config without its processor files (OSError "... preprocessor_config.json")
  where torchvision is present is tests/processor/test_worker_counts.py's;
- the map: Arrow's ``ArrowInvalid`` from datasets' writer (programs/inject_library_fault.py);
- saving: ``OSError(ENOSPC)`` from ``save_to_disk``: the disk full, with the file.
Each run's output folder must not appear.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import RELEASE, good_rows, last_line, prepare_args, run_batch, write_dataset
from packaging.version import Version
from tiny_checkpoints import model_class_and_config, write_processor_files

from speculators_qwen_compat import demo
from speculators_qwen_compat.cli import fatal_stage

PREFIX = "speculators_qwen_compat: error: "
LOADS_PROCESSOR = Version("0.6") <= RELEASE


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("stages")
    data = write_dataset(work / "d.jsonl", good_rows(4))
    _, config = model_class_and_config("qwen35")
    qwen36 = work / "qwen36"
    config.save_pretrained(qwen36)
    demo.write_model(qwen36, "qwen36")
    write_processor_files(qwen36)
    plain = demo.write_model(work / "plain", "qwen36")
    outputs = {name: work / f"out-{name}" for name in ("load", "map", "save")}
    cases = {
        "load": prepare_args(qwen36, outputs["load"], data, workers=1),
        "map": ["--fault", "map", *prepare_args(plain, outputs["map"], data, workers=1)],
        "save": ["--fault", "save", *prepare_args(plain, outputs["save"], data, workers=1)],
    }
    modules = {"map": "inject_library_fault", "save": "inject_library_fault"}
    # each fault stays injected: one interpreter per injected case
    results = run_batch(work / "logs-load", {"load": cases["load"]})
    for name in ("map", "save"):
        results |= run_batch(work / f"logs-{name}", {name: cases[name]}, modules)
    return {"results": results, "outputs": outputs}


def _line(result: Any) -> str:
    assert result.returncode == 1, result.stderr[-3000:]
    line = last_line(result.stderr)
    assert line.startswith(PREFIX), result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    return line[len(PREFIX) :]


def test_a_processor_that_needs_torchvision(runs: dict[str, Any]) -> None:
    result = runs["results"]["load"]
    if not LOADS_PROCESSOR:
        assert result.returncode == 0, result.stderr[-3000:]  # 0.5 loads a tokenizer
        return
    line = _line(result)
    assert line.startswith(fatal_stage.LOADING.name + ": "), line
    assert "pip install pillow torchvision" in line
    assert not runs["outputs"]["load"].exists()


def test_an_arrow_error_in_the_map(runs: dict[str, Any]) -> None:
    line = _line(runs["results"]["map"])
    assert line.startswith(f"{fatal_stage.MAPPING.name}: ArrowInvalid: injected"), line
    assert "rerun with --debug and send the traceback" in line
    assert not runs["outputs"]["map"].exists()


def test_a_full_disk_while_saving(runs: dict[str, Any]) -> None:
    line = _line(runs["results"]["save"])
    assert line.startswith(f"{fatal_stage.SAVING.name}: OSError: "), line
    assert "the disk is full (" in line and ".arrow)" in line
    assert "free space there" in line
    assert not runs["outputs"]["save"].exists()
