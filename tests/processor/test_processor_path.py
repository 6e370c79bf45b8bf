"""The multimodal processor path: a Qwen3.5/3.6 checkpoint that AutoProcessor loads as
``Qwen3VLProcessor``, end to end through prepare_data on 0.6.0.2, 0.7.0.2, 0.8.1 and 0.9.0.

Run under the vision base only (torch 2.14.1 + torchvision 0.29.1), one release at a time:

    HF_HUB_OFFLINE=1 tools/release_python.sh RELEASE vision -P -m pytest -q -m vision \\
        tests/processor

Every test here is marked ``vision``; tests/conftest.py deselects them where torchvision does not
import (the CPU base) and refuses ``-m vision`` there, so they never pass by not running.

The checkpoint folder is weight-less: config.json (``model_type: qwen3_5``), a
preprocessor_config.json naming Qwen2VLImageProcessor / Qwen3VLProcessor with patch size 16, the
real Qwen3.5/3.6 vocabulary (``make vocab``) and a template. Releases 0.6+ load the target with
AutoProcessor, so a real Qwen3.5/3.6 checkpoint takes this path, not the tokenizer path the other
tests take. Three prepare_data runs per release (in one interpreter: conftest.run_batch),
text-only data in both formats (every other row ShareGPT, the others OpenAI) with rejected rows
mixed in:

- the Qwen3.6-style template through the processor folder and through the tokenizer-only folder
  (same vocabulary and template, no config.json): masks right (mask oracle), skips counted,
  upstream's ``messages`` column holding the rows as written, and identical rows from the two
  runs (text-only data renders as with the tokenizer);
- the demo gallery's ``generation_tags`` template: the processor's assistant mask is batched
  (``[[0, ..., 1, ...]]``); the mask-probe fix reads it as "HF mask available" on 0.6/0.7, and the
  rows must carry transformers' assistant mask (closing ``<|im_end|>`` supervised).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    RELEASE,
    RENDERS,
    good_rows,
    prepare_args,
    read_report,
    rejected_rows,
    run_batch,
)
from mask_oracle import check_masks, column_signatures, load_rows, message_signatures
from packaging.version import Version
from qwen_vocab import copy_vocab

from speculators_qwen_compat import demo
from speculators_qwen_compat.demo.gallery import GALLERY_REJECTS, gallery_template
from speculators_qwen_compat.demo.sample_data import REJECTED_REASONS, to_sharegpt

pytestmark = pytest.mark.vision

SEQ = 512
WITH_TOOLS = Version("0.7") <= RELEASE
#: The releases that load the target with AutoProcessor (0.5 loads a tokenizer).
PROCESSOR_RELEASES = Version("0.6") <= RELEASE

CONFIG = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "model_type": "qwen3_5",
    "transformers_version": "5.9.0",
}
PREPROCESSOR = {
    "image_processor_type": "Qwen2VLImageProcessor",
    "processor_class": "Qwen3VLProcessor",
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "size": {"shortest_edge": 65536, "longest_edge": 16777216},
}


def checkpoint(destination: Path, template: str, processor: bool = True) -> Path:
    """A weight-less Qwen3.5/3.6 folder; ``processor=False``: the tokenizer files only."""
    copy_vocab(destination)
    (destination / "chat_template.jinja").write_text(template, encoding="utf-8")
    if processor:
        (destination / "config.json").write_text(json.dumps(CONFIG), encoding="utf-8")
        preprocessor = json.dumps(PREPROCESSOR)
        (destination / "preprocessor_config.json").write_text(preprocessor, encoding="utf-8")
    return destination


def _rows() -> tuple[list[dict[str, Any]], list[tuple[str, dict[str, Any]]], list[dict]]:
    good, rejected = good_rows(12, seed=5), rejected_rows()
    return good, rejected, good[:6] + [row for _, row in rejected] + good[6:]


def _mixed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Both formats in one file: every other row in ShareGPT form."""
    return [to_sharegpt(r) if i % 2 else r for i, r in enumerate(rows)]


def _as_written(picked: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of ``picked`` as ``_mixed(rows)`` writes them."""
    written = _mixed(rows)
    return [written[i] for i, row in enumerate(rows) if any(row is p for p in picked)]


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def _messages(output: Path) -> list[list[dict[str, Any]]] | None:
    from datasets import load_from_disk

    dataset = load_from_disk(str(output)).with_format(None)
    return list(dataset["messages"]) if "messages" in dataset.column_names else None


def test_checkpoint_loads_as_the_multimodal_processor(tmp_path: Path) -> None:
    from transformers import AutoProcessor

    model = checkpoint(tmp_path / "ckpt", demo.chat_template("qwen36"))
    processor = AutoProcessor.from_pretrained(str(model))
    assert type(processor).__name__ == "Qwen3VLProcessor"
    assert processor.image_processor.patch_size == 16
    chat = [{"role": "user", "content": [{"type": "text", "text": "Hello 你好"}]}]
    encoded = processor.apply_chat_template(chat, tokenize=True, return_dict=True)
    assert encoded["input_ids"][0][:6] == [248045, 846, 198, 9419, 220, 109266]
    assert "mm_token_type_ids" in encoded


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The module's three prepare_data runs in one interpreter (conftest.run_batch), on the
    same data: ``rows``: (good, rejected, all) as made; name -> (model, output, result)."""
    work = tmp_path_factory.mktemp("processor")
    good, rejected, rows = _rows()
    data = _write(work / "data.jsonl", _mixed(rows))
    template = demo.chat_template("qwen36")
    models = {
        "processor": checkpoint(work / "ckpt", template),
        "tokenizer": checkpoint(work / "tok", template, processor=False),
        "generation_tags": checkpoint(work / "tags", gallery_template("generation_tags")),
    }
    outputs = {name: work / f"out-{name}" for name in models}
    cases = {
        name: prepare_args(model, outputs[name], data, seq_length=SEQ)
        for name, model in models.items()
    }
    results = run_batch(work / "logs", cases)
    made = {name: (models[name], outputs[name], results[name]) for name in models}
    return {"rows": (good, rejected, rows), **made}


def test_processor_run_matches_the_tokenizer_run(runs: dict[str, Any]) -> None:
    """Both formats in one file (every other row ShareGPT), through the processor folder and
    the tokenizer-only folder."""
    good, rejected, rows = runs["rows"]
    proc = runs["processor"][0]
    good_written = _as_written(good, rows)
    outputs = {}
    for name in ("processor", "tokenizer"):
        _, output, result = runs[name]
        assert result.returncode == 0, f"{name}: {result.stderr[-3000:]}"
        outputs[name] = output

    want_skips = dict(Counter(REJECTED_REASONS[kind] for kind, _ in rejected))
    for name, output in outputs.items():
        rows_out = load_rows(output)
        expected = check_masks(proc, rows_out, good_written, RENDERS, with_tools=WITH_TOOLS)
        report = read_report(output)
        assert report["skipped"] == want_skips, name
        assert report["rows_out"] == expected, name
        assert report["conversations_in"] == len(rows), name
    assert load_rows(outputs["processor"]) == load_rows(outputs["tokenizer"])

    # upstream writes the conversations it rendered for a multimodal processor (0.6+), in its
    # Chat Completions form; the tokenizer run has no such column
    assert _messages(outputs["tokenizer"]) is None
    messages = _messages(outputs["processor"])
    if not PROCESSOR_RELEASES:
        assert messages is None
    else:
        assert messages is not None, "no messages column"
        assert column_signatures(messages) == message_signatures(good_written, RENDERS)


def test_generation_tags_batched_processor_mask(runs: dict[str, Any]) -> None:
    """The processor returns the assistant mask batched; on 0.6/0.7 the fixed probe must read
    it (the template has ``{% generation %}`` tags) and the rows carry that mask."""
    good, rejected, rows = runs["rows"]
    model, output, result = runs["generation_tags"]
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(str(model))
    probe = [
        {"role": "user", "content": [{"type": "text", "text": "test"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "test"}]},
    ]
    mask = processor.apply_chat_template(
        probe, tokenize=True, return_assistant_tokens_mask=True, return_dict=True
    )["assistant_masks"]
    mask = mask.tolist() if hasattr(mask, "tolist") else mask
    assert isinstance(mask[0], list) and 1 in mask[0], mask  # batched, with the turn marked

    assert result.returncode == 0, result.stderr[-3000:]
    hf_mask = not RENDERS
    if hf_mask and PROCESSOR_RELEASES:  # upstream says which path built the masks
        assert "Using HF assistant token mask" in result.stderr
    # the permissive template takes the tool-response-only and late-system rows
    accepted = [row for kind, row in rejected if kind in ("tool_only_user", "late_system")]
    kept = _as_written(good + accepted, rows)
    expected = check_masks(model, load_rows(output), kept, RENDERS, hf_mask, with_tools=WITH_TOOLS)
    report = read_report(output)
    want = Counter(
        GALLERY_REJECTS["generation_tags"] if kind == "no_user" else REJECTED_REASONS[kind]
        for kind, _ in rejected
        if kind in ("no_user", "numeric_content")
    )
    assert report["skipped"] == dict(want)
    assert report["rows_out"] == expected
