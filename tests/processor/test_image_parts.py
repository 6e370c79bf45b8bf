"""Image conversations on the processor path: every row prepare_data writes carries the
processor's tokens for its images, or the conversation is skipped and counted with its reason.

Run under the vision base (``-m vision``, 0.6.0.2 and later; see test_processor_path.py). Generated
PNGs of two sizes; the images named in every form users write them: a path, a ``file://`` URL,
the OpenAI ``image_url`` part (its URL also as a plain string), two images in one turn, Qwen's
``{"type": "image", "image": ...}`` part (a path and a ``file://`` URL), LLaVA's ``image`` and
LLaMA-Factory's ``images`` columns with ``<image>`` placeholders; plus a missing file, a
placeholder count that differs from the files given, a placeholder with no column, and a
text-only row.
The oracle is transformers' own ``Qwen3VLProcessor``: its ``apply_chat_template`` reads the
images and expands each into its count of ``<|image_pad|>`` tokens (the count vLLM's render gives:
docs/upstream.md "Images"). Two runs in one interpreter (conftest.run_batch):

- the checkpoint folder (AutoProcessor loads the processor on 0.6+): on 0.6/0.7 each kept row is
  exactly the processor's ids of its conversation (the ``file://`` and ``image_url`` rows too,
  which 0.6/0.7 lost before); only the missing file is skipped, with its reason;
- the tokenizer-only folder (0.6/0.7 load a tokenizer there): one pad per image and no pixels,
  so every image conversation is skipped with the reason, the text row kept;
- ``doctor`` on the checkpoint folder and the same data: the image conversations counted, and
  for the first three the pads per image transformers' image processor gives for each image
  (its ``image_grid_thw`` over the merge size) and the pads in the row the run writes.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import PACKAGE_MAIN, RENDERS, prepare_args, read_report, run_batch
from mask_oracle import load_rows
from test_processor_path import checkpoint

from speculators_qwen_compat import demo
from speculators_qwen_compat.data.normalize.processor_media import NEEDS_PROCESSOR
from speculators_qwen_compat.data.render.media import MISSING_FILE

pytestmark = pytest.mark.vision

IMAGE_PAD = "<|image_pad|>"
SIZES = {"red.png": (64, 64), "green.png": (128, 96)}


def _images(folder: Path) -> dict[str, Path]:
    from PIL import Image

    paths = {}
    for i, (name, size) in enumerate(SIZES.items()):
        paths[name] = folder / name
        Image.new("RGB", size, (200 * (i == 0), 200 * (i == 1), 40)).save(paths[name])
    return paths


def _conversations(images: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """name -> row as written; every reply distinct (rows are matched by their ids)."""
    red, green = str(images["red.png"]), str(images["green.png"])
    gone = str(images["red.png"].parent / "gone.png")

    def row(parts: list[dict[str, Any]], reply: str) -> dict[str, Any]:
        user = {"role": "user", "content": [*parts, {"type": "text", "text": "What is shown?"}]}
        return {"messages": [user, {"role": "assistant", "content": reply}]}

    return {
        "path": row([{"type": "image", "path": red}], "A red square."),
        "file_url": row([{"type": "image", "url": f"file://{green}"}], "A green box."),
        "image_url": row([{"type": "image_url", "image_url": {"url": f"file://{red}"}}], "Red."),
        "two": row([{"type": "image", "path": red}, {"type": "image", "path": green}], "Two."),
        "missing": row([{"type": "image", "path": gone}], "?"),
        "text": {
            "messages": [
                {"role": "user", "content": "Hello there"},
                {"role": "assistant", "content": "Hi, how can I help?"},
            ]
        },
        # the forms people hold images in (data/normalize/media_forms.py), after the rows above
        # so the doctor's first three stay those
        "qwen_image": row([{"type": "image", "image": green}], "Qwen green."),
        "qwen_file": row([{"type": "image", "image": f"file://{red}"}], "Qwen red."),
        "url_string": row([{"type": "image_url", "image_url": f"file://{green}"}], "Plain url."),
        "llava": {
            "image": red,
            "conversations": [
                {"from": "human", "value": "<image>\nWhat is shown?"},
                {"from": "gpt", "value": "LLaVA red."},
            ],
        },
        "factory": {
            "images": [red, green],
            "messages": [
                {"role": "user", "content": "<image>Left, <image>right: what?"},
                {"role": "assistant", "content": "Factory two."},
            ],
        },
        "factory_mismatch": {
            "images": [red],
            "messages": [
                {"role": "user", "content": "<image><image>Compare."},
                {"role": "assistant", "content": "Never written."},
            ],
        },
        "placeholder_only": {
            "messages": [
                {"role": "user", "content": "<image>What is it?"},
                {"role": "assistant", "content": "Never written either."},
            ]
        },
    }


#: rows held in a column form, as transformers' processor reads them (the oracle's input)
def _oracle_rows(images: dict[str, Path]) -> dict[str, dict[str, Any]]:
    red, green = str(images["red.png"]), str(images["green.png"])

    def image(path: str) -> dict[str, str]:
        return {"type": "image", "path": path}

    def text(words: str) -> dict[str, str]:
        return {"type": "text", "text": words}

    return {
        "llava": {"messages": [
            {"role": "user", "content": [image(red), text("\nWhat is shown?")]},
            {"role": "assistant", "content": "LLaVA red."}]},
        "factory": {"messages": [
            {"role": "user", "content": [image(red), text("Left, "), image(green),
                                         text("right: what?")]},
            {"role": "assistant", "content": "Factory two."}]},
    }  # fmt: skip


#: rows skipped for their form, with the reason (never written with a literal <image>)
FORM_SKIPS = {
    "factory_mismatch": "2 <image> placeholders in the text but 1 files in the 'images' column",
    "placeholder_only": "<image> placeholder in the text but no 'images' or 'image' column "
    "names its file",
}


def _oracle_ids(processor: Any, row: dict[str, Any]) -> list[int]:
    """transformers' processor on the row, images as plain paths (the form it reads)."""
    turns = []
    for turn in row["messages"]:
        content = turn["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        parts = []
        for part in content:
            spec = part.get("image_url")
            url = (
                part.get("url")
                or part.get("image")
                or (spec.get("url") if isinstance(spec, dict) else spec)
            )
            if part["type"] != "text":
                part = {"type": "image", "path": part.get("path") or url.removeprefix("file://")}
            parts.append(part)
        turns.append({**turn, "content": parts})
    encoded = processor.apply_chat_template(turns, tokenize=True, return_dict=True)
    return list(encoded["input_ids"][0])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("images")
    images = _images(work)
    rows = _conversations(images)
    data = work / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows.values()), encoding="utf-8")
    template = demo.chat_template("qwen36")
    models = {"processor": checkpoint(work / "ckpt", template)}
    if not RENDERS:  # 0.8+ tokenizer-only rendering is local_render's (tests/test_render_*.py)
        models["tokenizer"] = checkpoint(work / "tok", template, processor=False)
    outputs = {name: work / f"out-{name}" for name in models}
    cases = {name: prepare_args(m, outputs[name], data) for name, m in models.items()}
    cases["doctor"] = ["doctor", "--model", str(models["processor"]), "--data", str(data)]
    results = run_batch(work / "logs", cases, {"doctor": PACKAGE_MAIN})
    return {"rows": rows, "model": models["processor"], "outputs": outputs, "results": results,
            "images": work, "oracle": _oracle_rows(images)}  # fmt: skip


def test_image_rows_carry_the_processors_tokens(runs: dict[str, Any]) -> None:
    from transformers import AutoProcessor

    result = runs["results"]["processor"]
    assert result.returncode == 0, result.stderr[-3000:]
    processor = AutoProcessor.from_pretrained(str(runs["model"]))
    assert type(processor).__name__ == "Qwen3VLProcessor"
    pad = processor.tokenizer.convert_tokens_to_ids(IMAGE_PAD)
    rows = runs["rows"]
    kept = {n: row for n, row in rows.items() if n != "missing" and n not in FORM_SKIPS}
    oracle = runs["oracle"]
    expected = {n: _oracle_ids(processor, oracle.get(n, row)) for n, row in kept.items()}
    # the processor expands each image into several pads, differently per size
    assert expected["path"].count(pad) > 1
    assert expected["file_url"].count(pad) not in (1, expected["path"].count(pad))
    out = load_rows(runs["outputs"]["processor"])
    report = read_report(runs["outputs"]["processor"])
    assert report["skipped"] == {MISSING_FILE: 1, **dict.fromkeys(FORM_SKIPS.values(), 1)}
    assert report["errors"] == 0  # 0.8+'s adapter raised on OpenAI image_url parts
    assert report["conversations_kept"] == len(kept)
    if RENDERS:  # one row per assistant turn: the pads of each row are the processor's
        got = sorted(row["input_ids"].count(pad) for row in out)
        assert got == sorted(ids.count(pad) for ids in expected.values())
    else:
        assert sorted(row["input_ids"] for row in out) == sorted(expected.values())


@pytest.mark.skipif(RENDERS, reason="0.8+ load the processor itself: no tokenizer-only run")
def test_tokenizer_only_target_skips_image_rows(runs: dict[str, Any]) -> None:
    result = runs["results"]["tokenizer"]
    assert result.returncode == 0, result.stderr[-3000:]
    report = read_report(runs["outputs"]["tokenizer"])
    images = sum(name != "text" and name not in FORM_SKIPS for name in runs["rows"])
    expected = Counter({NEEDS_PROCESSOR: images, **dict.fromkeys(FORM_SKIPS.values(), 1)})
    assert report["skipped"] == dict(expected)
    assert report["rows_out"] == 1


def test_doctor_shows_tokens_per_image(runs: dict[str, Any]) -> None:
    from PIL import Image
    from transformers import AutoImageProcessor

    result = runs["results"]["doctor"]
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "media: 10 conversations with images or videos (12 images, 0 videos)" in out
    images = AutoImageProcessor.from_pretrained(str(runs["model"]))

    def pads(name: str) -> int:
        grid = images(images=[Image.open(runs["images"] / name)])["image_grid_thw"][0]
        return int(grid.prod()) // images.merge_size**2

    red, green = pads("red.png"), pads("green.png")
    assert red != green
    data = runs["images"] / "data.jsonl"
    shown = {1: [red], 2: [green], 3: [red]}
    assert "  media warnings: none" in out, out
    for line, per_image in shown.items():
        counts = ", ".join(map(str, per_image))
        assert (
            f"  {data}:{line}: {len(per_image)} images; tokens per image (processor): {counts}; "
            f"in the row: {sum(per_image)}"
        ) in out, out
    assert f'    1 x "{MISSING_FILE}"' in out
