"""prepare_data writes the same rows with the README's eight workers as with one, on the checkpoint
shape users have: a composite Qwen3.6 config (``text_config`` + ``vision_config``) with its
processor files, so 0.6+ load the processor and rows keep upstream's ``messages``.

The data is a corpus concatenated from sources (plain chats, then tool-call conversations, then
image conversations: one kind per worker's shard, as the 800K-row Qwen3.6 corpus is) and the
same rows interleaved; the same corpus through the tokenizer files alone (no ``messages``
column); and a composite config without its processor files (one line saying to copy them).
Before the messages_json fix, two or more workers over the blocks ended
in "The features can't be aligned because the key messages ...": each shard typed ``messages``
from its own rows. The oracle: the one-worker run of the same data, row for row (every column
decoded), and the conversations as written for the plain chats' ``messages``.
Vision base (``-m vision``), 0.6.0.2 and later; the runs share one interpreter (run_batch).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import PACKAGE_MAIN, last_line, prepare_args, read_report, run_batch
from tiny_checkpoints import model_class_and_config, write_processor_files

from speculators_qwen_compat import demo
from speculators_qwen_compat.cli import fatal_stage

pytestmark = pytest.mark.vision

WORKERS = (1, 2, 8)  # 8: the README's --num-preprocessing-workers
PER_KIND = 8  # 24 conversations: three per worker of eight


def _composite_checkpoint(folder: Path, processor: bool) -> Path:
    """Qwen3.6-27B's shape without weights: the composite config, the tokenizer and template,
    and (``processor``) the image and video processor files."""
    _, config = model_class_and_config("qwen35")
    config.save_pretrained(folder)
    demo.write_model(folder, "qwen36")
    if processor:
        write_processor_files(folder)
    return folder


def _tokenizer_folder(folder: Path) -> Path:
    """The tokenizer and template alone (no config.json): every release loads a tokenizer."""
    return demo.write_model(folder, "qwen36")


def _image(path: Path) -> Path:
    from PIL import Image

    Image.new("RGB", (64, 48), (180, 40, 40)).save(path)
    return path


def _kinds(image: Path) -> dict[str, list[dict[str, Any]]]:
    """PER_KIND distinct conversations of each kind, OpenAI form."""
    plain, tools, images = [], [], []
    for i in range(PER_KIND):
        plain.append(
            {"messages": [{"role": "user", "content": f"Say hello number {i}."},
                          {"role": "assistant", "content": f"Hello number {i}!"}]}
        )  # fmt: skip
        arguments = json.dumps({"city": f"C{i}"})
        call = {"type": "function", "function": {"name": "get_weather", "arguments": arguments}}
        tools.append(
            {"messages": [{"role": "user", "content": f"Weather in C{i}?"},
                          {"role": "assistant", "content": "", "tool_calls": [call]},
                          {"role": "tool", "content": f"sunny, {i} degrees"},
                          {"role": "assistant", "content": f"Sunny and {i} degrees."}]}
        )  # fmt: skip
        user = [{"type": "image", "path": str(image)}, {"type": "text", "text": f"Photo {i}?"}]
        images.append(
            {"messages": [{"role": "user", "content": user},
                          {"role": "assistant", "content": f"A red photo, {i}."}]}
        )  # fmt: skip
    return {"plain": plain, "tools": tools, "images": images}


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _rows(output: Path) -> list[str]:
    """Every row, every column decoded, as canonical JSON (tensors as lists)."""
    from datasets import load_from_disk

    dataset = load_from_disk(str(output)).with_format(None)
    return [json.dumps(row, sort_keys=True) for row in dataset]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("workers")
    kinds = _kinds(_image(work / "red.png"))
    blocks = [row for rows in kinds.values() for row in rows]
    interleaved = [row for trio in zip(*kinds.values(), strict=True) for row in trio]
    data = {"blocks": _write(work / "blocks.jsonl", blocks),
            "interleaved": _write(work / "interleaved.jsonl", interleaved)}  # fmt: skip
    models = {"processor": _composite_checkpoint(work / "ckpt", processor=True),
              "tokenizer": _tokenizer_folder(work / "tok")}  # fmt: skip
    cases, outputs = {}, {}
    for model_name, model in models.items():
        for data_name, path in data.items():
            for workers in WORKERS:
                name = f"{model_name}-{data_name}-{workers}"
                outputs[name] = work / name
                cases[name] = prepare_args(model, outputs[name], path, workers=workers)
    results = run_batch(work / "logs", cases)
    # a composite config whose processor files were not copied: 0.6+ load its processor
    outputs["no_processor"] = work / "no-processor"
    no_processor = _composite_checkpoint(work / "no-processor-ckpt", processor=False)
    cases = {"no_processor": prepare_args(no_processor, outputs["no_processor"], data["blocks"])}
    results |= run_batch(work / "logs-no-processor", cases)
    # the fix off: the join refused, as before it (the test above can fail), in one line
    outputs["unfixed"] = work / "unfixed"
    unfixed = {"unfixed": prepare_args(models["processor"], outputs["unfixed"], data["blocks"],
                                       workers=8)}  # fmt: skip
    # doctor on the same data: its sample goes through prepare_data with 8 workers (its default)
    unfixed["doctor-unfixed"] = ["doctor", "--model", str(models["processor"]), "--data",
                                 str(data["blocks"]), "--seq-length", "512"]  # fmt: skip
    modules = {"doctor-unfixed": PACKAGE_MAIN}
    results |= run_batch(
        work / "logs-unfixed", unfixed, modules, SPECULATORS_QWEN_COMPAT="off:messages_json"
    )
    doctor = {"doctor": unfixed["doctor-unfixed"]}
    results |= run_batch(work / "logs-doctor", doctor, {"doctor": PACKAGE_MAIN})
    return {"kinds": kinds, "outputs": outputs, "results": results}


@pytest.mark.parametrize("model", ["processor", "tokenizer"])
@pytest.mark.parametrize("data", ["blocks", "interleaved"])
def test_every_worker_count_writes_the_rows_one_worker_writes(
    runs: dict[str, Any], model: str, data: str
) -> None:
    results, outputs = runs["results"], runs["outputs"]
    # the tokenizer alone cannot count image pads: the image conversations are counted skips
    skipped = 0 if model == "processor" else PER_KIND
    for workers in WORKERS:
        result = results[f"{model}-{data}-{workers}"]
        assert result.returncode == 0, (workers, result.stderr[-3000:])
        summary = f"skipped {skipped} of {3 * PER_KIND} conversations"
        assert summary in last_line(result.stdout), result.stdout
    one = _rows(outputs[f"{model}-{data}-1"])
    assert len(one) >= 3 * PER_KIND - skipped
    for workers in WORKERS[1:]:
        assert _rows(outputs[f"{model}-{data}-{workers}"]) == one, workers


def test_without_the_fix_the_join_fails_in_one_line_saying_what_to_do(
    runs: dict[str, Any],
) -> None:
    result = runs["results"]["unfixed"]
    assert result.returncode == 1, result.stderr[-3000:]
    line = last_line(result.stderr)
    assert line.startswith(
        f"speculators_qwen_compat: error: {fatal_stage.MAPPING.name}: ValueError: The features "
        "can't be aligned because the key messages"
    ), line
    assert "rerun with --num-preprocessing-workers 1" in line
    assert not runs["outputs"]["unfixed"].exists()


def test_doctor_promises_what_the_run_writes(runs: dict[str, Any]) -> None:
    """doctor's "would keep" is prepare_data's own count on its sample with eight workers; with
    the fix off, doctor fails as that run fails, naming it."""
    doctor = runs["results"]["doctor"]
    assert doctor.returncode == 0, doctor.stderr[-3000:]
    report = read_report(runs["outputs"]["processor-blocks-8"])
    assert "prepare_data on these rows (--num-preprocessing-workers 8" in doctor.stdout
    kept = f"would keep {report['conversations_kept']} conversations as {report['rows_out']} rows"
    assert kept in doctor.stdout, doctor.stdout
    unfixed = runs["results"]["doctor-unfixed"]
    assert unfixed.returncode == 1, unfixed.stderr[-3000:]
    line = last_line(unfixed.stderr)
    assert line.startswith(
        "speculators_qwen_compat: error: prepare_data fails on the first 24 rows "
        f"(--num-preprocessing-workers 8): {fatal_stage.MAPPING.name}: ValueError: The features"
    ), line


def test_a_composite_config_without_its_processor_files(runs: dict[str, Any]) -> None:
    result = runs["results"]["no_processor"]
    assert result.returncode == 1, result.stderr[-3000:]
    line = last_line(result.stderr)
    assert line.startswith(f"speculators_qwen_compat: error: {fatal_stage.LOADING.name}: "), line
    assert "copy the checkpoint's preprocessor_config.json" in line
    assert not runs["outputs"]["no_processor"].exists()


def test_kept_messages_are_the_conversations_as_written(runs: dict[str, Any]) -> None:
    """With processor files, rows keep ``messages`` (upstream's, for hidden-state extraction):
    each plain chat's exactly as written, no keys added, whichever worker wrote it (upstream
    shuffles the rows: the chats are looked up, not taken in order)."""
    from datasets import load_from_disk

    for workers in WORKERS:
        output = runs["outputs"][f"processor-blocks-{workers}"]
        kept = load_from_disk(str(output)).with_format(None)["messages"]
        for row in runs["kinds"]["plain"]:
            assert row["messages"] in kept, (workers, row)
        assert read_report(output)["rows_out"] == len(kept)
    tokenizer = load_from_disk(str(runs["outputs"]["tokenizer-blocks-8"]))
    assert "messages" not in tokenizer.column_names  # no processor: ids and masks only
