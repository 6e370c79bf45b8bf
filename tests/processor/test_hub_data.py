"""Data as the Hub holds it: parquet, ``save_to_disk`` and ``hf:`` data with images as
``datasets.Image()`` bytes give the rows the same data gives as JSON lines with image paths.

Run under the vision base (``-m vision``, local rendering needs Pillow and the processor). The
data is written with ``datasets`` itself (``Dataset.to_parquet``, ``save_to_disk``), as a Hub
data set holds it: LLaMA-Factory rows (``messages`` + ``images: Sequence(Image())`` with
``<image>`` placeholders), Qwen-style parts whose ``image`` is an ``Image()`` value, flat
instruction rows with a system column, each ``Image()`` holding its bytes and a file name that is
nowhere on disk (what ``push_to_hub`` stores). The same conversations as JSON lines name the
image files by path. Oracles: the JSONL run's rows (the JSON path is checked against the
processor elsewhere: test_image_parts.py) and transformers' own ``Qwen3VLProcessor``, whose
``image_grid_thw`` gives each image's pad count.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import prepare_args, read_report, run_batch
from mask_oracle import load_rows
from test_processor_path import checkpoint

from speculators_qwen_compat import demo

pytestmark = pytest.mark.vision

IMAGE_PAD = "<|image_pad|>"
SIZES = {"red": (64, 64), "green": (128, 96), "blue": (96, 160)}


def _png(name: str) -> bytes:
    from PIL import Image

    colour = {"red": (200, 0, 0), "green": (0, 200, 0), "blue": (0, 0, 200)}[name]
    out = io.BytesIO()
    Image.new("RGB", SIZES[name], colour).save(out, format="PNG")
    return out.getvalue()


def _factory(images: list[str], text: str, reply: str) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": "<image>" * len(images) + text},
            {"role": "assistant", "content": reply},
        ],
        "images": images,
    }


def _qwen(image: str, reply: str) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": [{"type": "image", "image": image, "text": None},
                                         {"type": "text", "image": None, "text": "What?"}]},
            {"role": "assistant", "content": [{"type": "text", "image": None, "text": reply}]},
        ]
    }  # fmt: skip


FACTORY = [
    _factory(["red"], "What colour?", "Red."),
    _factory(["green", "blue"], "Compare them.", "Green, then blue."),
    _factory(["red", "red"], "Twice the same?", "Yes, the same red."),
    _factory([], "No image here, just text.", "Fine."),
]
QWEN = [_qwen("blue", "Blue, Qwen style."), _qwen("green", "Green, Qwen style.")]
FLAT = [
    {"instruction": "Say hi.", "output": "Hi!", "system": "Be brief."},
    {"instruction": "Count to three.", "output": "1, 2, 3.", "system": None},
]


def _with_images(rows: list[dict[str, Any]], value: Any) -> list[dict[str, Any]]:
    """The rows with each image name replaced by ``value(name)``."""
    out = []
    for row in rows:
        row = json.loads(json.dumps(row))
        if "images" in row:
            row["images"] = [value(n) for n in row["images"]]
        for turn in row["messages"]:
            for part in turn["content"] if isinstance(turn["content"], list) else []:
                if part.get("image"):
                    part["image"] = value(part["image"])
        out.append(row)
    return out


def _hub_bytes(name: str) -> dict[str, Any]:
    return {"bytes": _png(name), "path": f"{name}.png"}  # a name, no file: push_to_hub's form


def _write_hub_forms(work: Path) -> dict[str, Path]:
    from datasets import Dataset, Features, Image, Sequence, Value

    factory_features = Features({
        "messages": [{"role": Value("string"), "content": Value("string")}],
        "images": Sequence(Image()),
    })  # fmt: skip
    part = {"type": Value("string"), "image": Image(), "text": Value("string")}
    qwen_features = Features({"messages": [{"role": Value("string"), "content": [part]}]})
    factory = Dataset.from_list(_with_images(FACTORY, _hub_bytes), features=factory_features)
    qwen = Dataset.from_list(_with_images(QWEN, _hub_bytes), features=qwen_features)
    flat = Dataset.from_list(FLAT)
    folder = work / "hub" / "data"
    folder.mkdir(parents=True)
    factory.to_parquet(str(folder / "a-factory.parquet"))
    qwen.to_parquet(str(folder / "b-qwen.parquet"))
    flat.to_parquet(str(folder / "c-flat.parquet"))
    factory.save_to_disk(str(work / "saved"))
    _cache_as_hub_load(folder / "a-factory.parquet", work / "datasets-cache", "someorg/chats")
    repo, names = _as_downloaded_repo(work / "repo", folder), work / "names"
    shutil.copytree(repo / "data", names / "data")  # the Hub's data/<split>-* names, no README
    broken = work / "broken"
    broken.mkdir()
    cut = {"bytes": _png("red")[:90], "path": "cut.png"}  # a PNG cut in half
    with_cut = [*_with_images(FACTORY, _hub_bytes), _with_images(FACTORY[:1], lambda _: cut)[0]]
    Dataset.from_list(with_cut, features=factory_features).to_parquet(str(broken / "b.parquet"))
    return {"folder": folder, "file": folder / "a-factory.parquet", "saved": work / "saved",
            "repo": repo, "names": names, "broken": broken}  # fmt: skip


#: a dataset repo's README as the Hub shows it: the YAML header's configs: name each split's files
README = """---
license: mit
configs:
- config_name: default
  data_files:
  - split: train
    path: data/train-*
  - split: test
    path: data/test-*
---
# chats
"""


def _as_downloaded_repo(repo: Path, tables: Path) -> Path:
    """``huggingface-cli download --repo-type dataset --local-dir REPO`` of a repo whose train
    split is the LLaMA-Factory and Qwen rows (two shards) and whose test split is the flat rows:
    README.md, .gitattributes, data/<split>-NNNNN-of-NNNNN.parquet and the download's own
    .cache/huggingface/ metadata."""
    data = repo / "data"
    data.mkdir(parents=True)
    shards = {"a-factory": "train-00000-of-00002", "b-qwen": "train-00001-of-00002",
              "c-flat": "test-00000-of-00001"}  # fmt: skip
    for table, shard in shards.items():
        shutil.copy(tables / f"{table}.parquet", data / f"{shard}.parquet")
        meta = repo / ".cache" / "huggingface" / "download" / "data" / f"{shard}.parquet.metadata"
        meta.parent.mkdir(parents=True, exist_ok=True)
        meta.write_text("0123abcd\n", encoding="utf-8")
    (repo / "README.md").write_text(README, encoding="utf-8")
    (repo / ".gitattributes").write_text("*.parquet filter=lfs diff=lfs merge=lfs -text\n")
    return repo


def _cache_as_hub_load(parquet: Path, cache: Path, repo: str) -> None:
    """``HF_DATASETS_CACHE`` as ``load_dataset(repo)`` online leaves it (``org___name/default/
    0.0.0/<hash>/``: the parquet builder's Arrow files and dataset_info.json), which offline
    ``load_dataset(repo)`` reads (datasets' ``CachedDatasetModuleFactory``). Built with the
    parquet builder itself (no network here), then put at the name a Hub load gives it."""
    from datasets.packaged_modules.parquet.parquet import Parquet

    org, name = repo.split("/")
    builder = Parquet(cache_dir=str(cache / "build"), dataset_name=name, config_name="default",
                      data_files={"train": [str(parquet)]}, hash="0123456789abcdef")  # fmt: skip
    builder.download_and_prepare()
    built = Path(builder.cache_dir)  # build/<name>/default-<files hash>/0.0.0/<hash>
    target = cache / f"{org}___{name}" / "default" / "0.0.0" / built.name
    target.parent.mkdir(parents=True)
    built.rename(target)


def _write_jsonl(work: Path) -> dict[str, Path]:
    media = work / "pictures"
    media.mkdir()
    for name in SIZES:
        (media / f"{name}.png").write_bytes(_png(name))

    def path(name: str) -> str:
        return str(media / f"{name}.png")

    folder, train = work / "jsonl", work / "jsonl-train"
    folder.mkdir()
    train.mkdir()
    for name, rows in (("a-factory", FACTORY), ("b-qwen", QWEN), ("c-flat", FLAT)):
        lines = [json.dumps(r) for r in (_with_images(rows, path) if name != "c-flat" else rows)]
        (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        if name != "c-flat":
            shutil.copy(folder / f"{name}.jsonl", train / f"{name}.jsonl")
    return {"folder": folder, "file": folder / "a-factory.jsonl", "train": train,
            "test": folder / "c-flat.jsonl"}  # fmt: skip


FLAT_FLAGS = ("--prompt-column", "instruction", "--response-column", "output")
WORKERS = 8  # the README's --num-preprocessing-workers


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("hub")
    hub, jsonl = _write_hub_forms(work), _write_jsonl(work)
    model = checkpoint(work / "ckpt", demo.chat_template("qwen36"))
    data = {
        "jsonl": jsonl["folder"],
        "parquet_folder": hub["folder"],
        "hf_folder": f"hf:{hub['folder']}",
        "jsonl_file": jsonl["file"],
        "parquet_file": hub["file"],
        "saved": hub["saved"],
        "hub_cache": "hf:someorg/chats",
        "repo": hub["repo"],
        "hf_repo_test": f"hf:{hub['repo']}:test",
        "names": hub["names"],
        "broken": hub["broken"],
        "jsonl_train": jsonl["train"],
        "jsonl_test": jsonl["test"],
    }
    outputs = {name: work / "out" / name for name in data}
    cases = {
        name: prepare_args(model, outputs[name], spec, extra=FLAT_FLAGS, workers=WORKERS)
        for name, spec in data.items()
    }
    results = run_batch(work / "logs", cases, HF_DATASETS_CACHE=str(work / "datasets-cache"))
    out = outputs["parquet_folder"]
    media = out.with_name(out.name + "-media")
    first = {p.name: p.stat().st_mtime_ns for p in media.iterdir()}
    # a rerun over the same --output: the same media folder, its files reused, not rewritten
    again = prepare_args(model, out, data["parquet_folder"], extra=(*FLAT_FLAGS, "--overwrite"))
    results["rerun"] = run_batch(work / "logs-rerun", {"rerun": again})["rerun"]
    return {"model": model, "outputs": outputs, "results": results, "work": work,
            "first_media": first}  # fmt: skip


def _rows(output: Path) -> list[tuple[list[int], list[int]]]:
    return sorted((r["input_ids"], r["loss_mask"]) for r in load_rows(output))


@pytest.mark.parametrize(
    ("name", "oracle"),
    [("parquet_folder", "jsonl"), ("hf_folder", "jsonl"), ("parquet_file", "jsonl_file"),
     ("saved", "jsonl_file"), ("hub_cache", "jsonl_file"), ("repo", "jsonl_train"),
     ("hf_repo_test", "jsonl_test"), ("names", "jsonl_train")],
)  # fmt: skip
def test_hub_forms_give_the_jsonl_rows(runs: dict[str, Any], name: str, oracle: str) -> None:
    for run in (name, oracle):
        result = runs["results"][run]
        assert result.returncode == 0, (run, result.stderr[-3000:])
    got, expected = _rows(runs["outputs"][name]), _rows(runs["outputs"][oracle])
    assert expected and got == expected
    report = read_report(runs["outputs"][name])
    assert report["skipped"] == {} and report["errors"] == 0
    assert (
        report["conversations_kept"] == read_report(runs["outputs"][oracle])["conversations_kept"]
    )


def test_pads_are_the_processors(runs: dict[str, Any]) -> None:
    """Each written row holds, per image, transformers' processor's pad count for it."""
    from PIL import Image
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(str(runs["model"]))
    pad = processor.tokenizer.convert_tokens_to_ids(IMAGE_PAD)

    def pads(name: str) -> int:
        image = Image.open(io.BytesIO(_png(name)))
        grid = processor.image_processor(images=[image])["image_grid_thw"][0]
        return int(grid.prod()) // processor.image_processor.merge_size**2

    per_image = {name: pads(name) for name in SIZES}
    assert len(set(per_image.values())) == 3
    expected = sorted(
        [sum(per_image[n] for n in row["images"]) for row in FACTORY]
        + [per_image[row["messages"][0]["content"][0]["image"]] for row in QWEN]
        + [0] * len(FLAT)
    )
    got = sorted(ids.count(pad) for ids, _ in _rows(runs["outputs"]["parquet_folder"]))
    assert got == expected


def test_each_image_is_written_once_and_named_in_the_report(runs: dict[str, Any]) -> None:
    out = runs["outputs"]["parquet_folder"]
    media = out.with_name(out.name + "-media")
    names = sorted(p.name for p in media.iterdir())
    assert names == sorted(f"{hashlib.sha256(_png(n)).hexdigest()}.png" for n in SIZES)
    last = runs["results"]["parquet_folder"].stdout.strip().splitlines()[-1]
    assert last.endswith(f"; inline images in {media} (3 files, 3 written by this run: serve "
                         "with --allowed-local-media-path)"), last  # fmt: skip
    # the report on disk is the rerun's (--overwrite): the same 3 files, none written by it
    report = read_report(out)
    assert report["media_folder"] == str(media)
    assert (report["media_files"], report["media_files_written"]) == (3, 0)
    rerun_last = runs["results"]["rerun"].stdout.strip().splitlines()[-1]
    assert "(3 files, 0 written by this run: " in rerun_last, rerun_last
    # upstream's messages column names the files by path, as its hidden-state step sends them
    from datasets import load_from_disk

    messages = json.dumps(list(load_from_disk(str(out))["messages"]))
    assert str(media) in messages and "base64" not in messages
    # the JSONL run writes none; the rerun found every file written and rewrote none
    assert not runs["outputs"]["jsonl"].with_name("jsonl-media").exists()
    rerun = runs["results"]["rerun"]
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert {p.name: p.stat().st_mtime_ns for p in media.iterdir()} == runs["first_media"]


def test_a_downloaded_repo_is_read_as_its_train_split(runs: dict[str, Any]) -> None:
    """Train only (the test rows stay out of training), and the last line and the report say
    which split and which files were read, and which were not."""
    for name, rule in (("repo", "README configs"), ("names", "data/<split>-* names")):
        result = runs["results"][name]
        line = result.stdout.strip().splitlines()[-1]
        data = runs["outputs"][name].parent.parent / name
        assert (
            f"read split 'train' of {data}: data/train-00000-of-00002.parquet, "
            "data/train-00001-of-00002.parquet" in line
        ), (rule, line)
        assert (
            f"not read in {data}: data/test-00000-of-00001.parquet (split 'test': "
            f"hf:{data}:test reads it)" in line
        ), (rule, line)
        [entry] = read_report(runs["outputs"][name])["data"]
        assert entry["split"] == "train" and entry["read"] == [
            "data/train-00000-of-00002.parquet",
            "data/train-00001-of-00002.parquet",
        ]
        # README.md, .gitattributes and the download's .cache/ are no data, and not named
        assert list(entry["not_read"]) == ["data/test-00000-of-00001.parquet"], rule
    assert read_report(runs["outputs"]["hf_repo_test"])["data"][0]["split"] == "test"


def test_an_image_that_does_not_decode_is_a_skip_and_stays_out(runs: dict[str, Any]) -> None:
    result = runs["results"]["broken"]
    assert result.returncode == 0, result.stderr[-3000:]
    report = read_report(runs["outputs"]["broken"])
    assert report["skipped"] == {
        "Failed to load image: not an image file Pillow can decode (or truncated)": 1
    }, report["skipped"]
    assert report["conversations_kept"] == len(FACTORY)
    out = runs["outputs"]["broken"]
    media = out.with_name(out.name + "-media")
    cut = hashlib.sha256(_png("red")[:90]).hexdigest()
    assert sorted(p.name for p in media.iterdir()) == sorted(
        f"{hashlib.sha256(_png(n)).hexdigest()}.png" for n in SIZES
    ), cut
