"""Image conversations: local rendering gives exactly the ids of a real vLLM 0.32 render server.

The corpus is tests/image_corpus.py (two tiny composite checkpoints with the real Qwen3.6
vocabulary, PNGs of several sizes, the golden answers of a real server).

- Vision tier (``vision``: base-vision, every release from 0.6.0.2; local rendering is 0.8.1 and
  0.9.0's, the renderer itself is release-independent): data/render/render.py with this release's
  AutoProcessor (``Qwen3VLProcessor``) equals the golden ids case by case, and a case the server
  refused fails locally. Second, server-free oracle: transformers' own ``Qwen3VLProcessor``
  called on each image gives the golden count of ``<|image_pad|>``.
- Text tier (every release's suite, no Pillow): the text-only cases with the tokenizer
  AutoTokenizer loads for the composite checkpoint (0.8.1's transformers 5.16 loads another class
  than vLLM's 5.19: data/render/vllm_tokenizer.py).
- Server tier (``vllm``): the server renders the corpus again (any drift from the golden ids
  fails); prepare_data with images by path and by ``file://`` URL gives identical rows, whole
  Arrow rows with upstream's ``messages`` column, locally and through the server (0.8.1 and
  0.9.0, base-vision); a server started without ``--allowed-local-media-path`` fails the run at
  once with one line naming the flag.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import image_corpus
import parity_corpus
import pytest
import vllm_server
from conftest import RENDERS, subprocess_env
from qwen_vocab import vocab_dir

from speculators_qwen_compat.data.render.render import render_ids

ROOT = Path(__file__).resolve().parents[1]
RENDER_RELEASES = ("0.8.1", "0.9.0")
TEXT_CASES = ("vocab_words/full", "vocab_words/prompt")


def _local(processor: Any, case: dict[str, Any]) -> dict[str, Any]:
    options = {k: v for k, v in case.items() if k != "messages"}
    return parity_corpus.local_answer(lambda: render_ids(processor, case["messages"], **options))


#: What local rendering raises for an image the server refuses (a missing file, a placeholder
#: cut by truncation): a counted skip (data/render/media.py), never ids.
MEDIA_REFUSAL = "MediaNotRendered"


def _mismatches(local: dict[str, Any], golden: dict[str, Any]) -> list[str]:
    """parity_corpus.mismatches (ids equal; where the server refused with a template error, the
    template's rejection with its words), except that where the server refused an image (a file
    it cannot read, a placeholder truncation would cut, a size its processor refuses) local
    rendering agrees by refusing it as a media problem: a counted skip, never ids."""
    media = {
        name
        for name, answer in golden.items()
        if "status" in answer and local.get(name, {}).get("error") == MEDIA_REFUSAL
    }
    return parity_corpus.mismatches(
        {n: a for n, a in local.items() if n not in media},
        {n: a for n, a in golden.items() if n not in media},
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    """The images and one weight-less checkpoint folder per kind."""
    root = tmp_path_factory.mktemp("images")
    media = image_corpus.write_images(root / "media")
    models = {
        kind: image_corpus.model_folder(root / kind, kind, vocab_dir())
        for kind in image_corpus.KINDS
    }
    return media, models


@pytest.fixture(scope="module")
def processor_of(corpus: Any) -> Any:
    """``processor_of(kind)``: AutoProcessor of the kind's folder (``Qwen3VLProcessor``), loaded
    once per module."""
    from transformers import AutoProcessor

    loaded: dict[str, Any] = {}

    def get(kind: str) -> Any:
        if kind not in loaded:
            loaded[kind] = AutoProcessor.from_pretrained(str(corpus[1][kind]))
        return loaded[kind]

    return get


def test_corpus_covers_the_image_shapes() -> None:
    cases = image_corpus.cases(Path("/m"))
    for kind in image_corpus.KINDS:
        golden = image_corpus.load_golden(kind, vllm_server.VLLM_VERSION)
        assert set(golden) == set(cases), "golden fixtures out of date: re-record them"
        counts = {
            name: answer["ids"].count(image_corpus.IMAGE_PAD)
            for name, answer in golden.items()
            if "ids" in answer
        }
        # every image size gives its own count through the server; refusals are recorded
        sizes = {counts[f"one/{name}/full"] for name in ("square", "wide", "photo", "large")}
        assert len(sizes) >= 3, counts
        assert golden["missing_file/full"]["status"] == 500
        assert golden["one/sliver/full"]["status"] == 400
        assert "ids" in golden["later_turns/truncate_right_2048"]
        assert "status" in golden["later_turns/truncate_right_60"]
        # the edges: an image in a tool result and beside a developer turn render; the text
        # fits 64 tokens, the expanded image does not: vLLM keeps the image and cuts the text
        for name in ("tool_image/full", "developer_image/full", "system_developer_image/full"):
            assert golden[name]["ids"].count(image_corpus.IMAGE_PAD) > 1, name
        if kind == "dense":  # its 54 pads fit; the MoE kind's 70 do not (a refusal)
            assert len(golden["boundary/truncate_right_64"]["ids"]) == 64
        # a capped server counts fewer pads, under either form of the cap
        for cap in image_corpus.CAPS:
            capped = golden[f"capped/{cap}/large"]["ids"].count(image_corpus.IMAGE_PAD)
            assert capped < counts["one/large/full"], cap


@pytest.mark.skipif(not RENDERS, reason="local rendering is 0.8+'s (0.5-0.7 apply templates)")
@pytest.mark.parametrize("kind", image_corpus.KINDS)
def test_text_cases_use_the_tokenizer_vllm_builds(kind: str, corpus: Any) -> None:
    from transformers import AutoTokenizer

    media, models = corpus
    tokenizer = AutoTokenizer.from_pretrained(str(models[kind]))
    golden = image_corpus.load_golden(kind, vllm_server.VLLM_VERSION)
    cases = image_corpus.cases(media)
    local = {name: _local(tokenizer, cases[name]) for name in TEXT_CASES}
    assert _mismatches(local, {name: golden[name] for name in TEXT_CASES}) == []


@pytest.mark.vision
@pytest.mark.parametrize("kind", image_corpus.KINDS)
def test_local_image_rendering_matches_golden_server_ids(
    kind: str, corpus: Any, processor_of: Any
) -> None:
    media, _ = corpus
    processor = processor_of(kind)
    golden = image_corpus.load_golden(kind, vllm_server.VLLM_VERSION)
    local = {name: _local(processor, case) for name, case in image_corpus.cases(media).items()}
    assert _mismatches(local, golden) == []
    # a missing file is counted under the server's own reason
    assert local["missing_file/full"]["message"].endswith("No such file or directory: '<path>'")
    # every image the server refused is counted locally under the reason the server's refusal
    # is counted under (data/render/media_faults.py: one rule for both paths)
    from speculators_qwen_compat.data.render.media_faults import reason

    refused = {n: reason(a["message"]) for n, a in golden.items() if "status" in a}
    media = {n: r for n, r in refused.items() if r is not None}
    assert {n for n in media if n.startswith("fault/")} == {
        f"fault/{f}/{end}" for f in image_corpus.FAULTS for end in ("full", "prompt")
    }
    assert {n: local[n]["message"] for n in media} == media


@pytest.mark.vision
def test_no_pillow_fails_with_one_line_naming_the_fixes(
    corpus: Any, processor_of: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where Pillow cannot be imported, the first image fails the run (a CompatError: the entry
    point prints it as its one line), not a skip; text-only requests never import it."""
    from speculators_qwen_compat.core.errors import CompatError
    from speculators_qwen_compat.data.render import media

    media_dir, _ = corpus
    processor = processor_of("dense")
    cases = image_corpus.cases(media_dir)
    monkeypatch.setitem(sys.modules, "PIL", None)  # `import PIL` raises ImportError
    media._header_size.cache_clear()
    with pytest.raises(CompatError) as raised:
        render_ids(processor, **cases["one/wide/full"])
    assert str(raised.value) == media.NO_IMAGES
    assert "--render-endpoint URL" in media.NO_IMAGES and "pillow" in media.NO_IMAGES
    text = cases["vocab_words/full"]
    assert (
        render_ids(processor, **text)
        == image_corpus.load_golden("dense", vllm_server.VLLM_VERSION)["vocab_words/full"]["ids"]
    )


@pytest.mark.vision
@pytest.mark.parametrize("kind", image_corpus.KINDS)
def test_transformers_processor_counts_match_golden(
    kind: str, corpus: Any, processor_of: Any
) -> None:
    """The second oracle: transformers' Qwen3VLProcessor on the image itself, no server."""
    from PIL import Image

    media, _ = corpus
    processor = processor_of(kind)
    golden = image_corpus.load_golden(kind, vllm_server.VLLM_VERSION)
    placeholder = "<|vision_start|><|image_pad|><|vision_end|>"
    for name, (width, height) in image_corpus.IMAGES.items():
        case = "space_raw/full" if name == "with space" else f"one/{name}/full"
        with Image.open(media / f"{name}.png") as image:
            assert image.size == (width, height)
            try:
                out = processor(images=[image], text=[placeholder])
            except ValueError:  # the processor refuses it (aspect ratio): so did the server
                assert golden[case]["status"] == 400, name
                continue
        count = list(out["input_ids"][0]).count(image_corpus.IMAGE_PAD)
        assert golden[case]["ids"].count(image_corpus.IMAGE_PAD) == count, name


# --- the server tier -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def servers(corpus: Any) -> Any:
    """``servers(kind)``: a render server for ``kind`` reading the corpus' images, started on
    first use and stopped at the end of the module."""
    media, models = corpus
    started: dict[str, Any] = {}

    def get(kind: str) -> Any:
        if kind not in started:
            started[kind] = image_corpus.start_server(models[kind], media)
        return started[kind]

    yield get
    for server in started.values():
        server.stop()


@pytest.mark.vllm
@pytest.mark.parametrize("kind", image_corpus.KINDS)
def test_real_server_matches_golden(kind: str, corpus: Any, servers: Any) -> None:
    media, _ = corpus
    answers = image_corpus.server_answers(media, servers(kind).render)
    golden = image_corpus.load_golden(kind, vllm_server.VLLM_VERSION)
    drift = [name for name in sorted(answers) if answers[name] != golden.get(name)]
    assert drift == [], f"vLLM {vllm_server.VLLM_VERSION} drifted from the golden ids"


def _image_rows(media: Path) -> list[dict[str, Any]]:
    """Image data as users write it for speculators 0.8+: parts with a ``path`` (relative to
    the run's folder and absolute) or a ``file://`` URL; one conversation with a missing file."""

    def user(*parts: Any) -> dict[str, Any]:
        return {"role": "user", "content": list(parts)}

    def image(name: str, how: str) -> dict[str, Any]:
        path = media / f"{name}.png"
        if how == "url":
            return {"type": "image", "url": path.as_uri()}
        return {"type": "image", "path": str(path) if how == "abs" else f"media/{name}.png"}

    text = {"type": "text", "text": "Describe it, 40 words."}
    rows = [
        {"messages": [user(image("square", "rel"), text),
                      {"role": "assistant", "content": "A gradient square."}]},
        {"messages": [user(image("wide", "abs"), image("photo", "url"), text),
                      {"role": "assistant", "content": "Two gradients."},
                      user({"type": "text", "text": "And this?"}, image("tall", "url")),
                      {"role": "assistant", "content": "A tall one."}]},
        {"messages": [{"role": "user", "content": "No picture: 加拿大?"},
                      {"role": "assistant", "content": "Canada."}]},
        {"messages": [user(image("missing", "abs"), text),
                      {"role": "assistant", "content": "?"}]},
    ]  # fmt: skip
    return rows


def _prepare(
    release: str, model: Path, out: Path, data: Path, cwd: Path, *extra: str, retry: bool = False,
    workers: int = 1,
) -> Any:  # fmt: skip
    """prepare_data of ``release`` on the vision base (the processor path a Qwen3.6 checkpoint
    takes), whatever release and base run pytest; ``retry``: the default retry budget (180 s)
    for a failing server, else 20 s."""
    env = subprocess_env()
    if not retry:
        extra = ("--render-retry-seconds", "20", *extra)
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in paths if p and Path(p).parent.parent.name != "rel"
    )
    command = [
        str(ROOT / "tools" / "release_python.sh"), release, "vision", "-m",
        "speculators_qwen_compat.prepare_data", "--model", str(model), "--data", str(data),
        "--output", str(out), "--seq-length", "1024", "--num-preprocessing-workers", str(workers),
        *extra,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=900)


def _arrow_rows(folder: Path) -> list[dict[str, Any]]:
    """Every column of every row as saved (the whole Arrow rows)."""
    from datasets import load_from_disk

    return [dict(row) for row in load_from_disk(str(folder)).with_format(None)]


def _form_rows(media: Path) -> list[dict[str, Any]]:
    """The forms people hold images in (docs/images.md), the edges, and the files vLLM cannot
    use; each reply distinct."""

    def chat(content: Any, reply: str, **row: Any) -> dict[str, Any]:
        turns = [{"role": "user", "content": content}, {"role": "assistant", "content": reply}]
        return {**row, "messages": turns}

    def qwen(name: str) -> list[dict[str, Any]]:
        return [
            {"type": "image", "image": str(media / f"{name}.png")},
            {"type": "text", "text": "?"},
        ]

    return [
        chat(qwen("square"), "Qwen path."),
        chat([{"type": "image", "image": (media / "wide.png").as_uri()}], "Qwen file URL."),
        chat([{"type": "image_url", "image_url": (media / "photo.png").as_uri()}], "Plain url."),
        # OpenAI Responses parts: input_text is text, input_image a URL string
        chat([{"type": "input_text", "text": "Which?"},
              {"type": "input_image", "image_url": (media / "tall.png").as_uri()}], "Responses."),
        {"image": "media/tall.png", "conversations": [
            {"from": "human", "value": "<image>\nWhat is it?"},
            {"from": "gpt", "value": "LLaVA."}]},
        chat("<image> and <image>?", "Factory.",
             images=[str(media / "square.png"), str(media / "wide.png")]),
        chat("<image><image>?", "Mismatch.", images=[str(media / "square.png")]),
        chat("<image> what?", "No column."),
        # bytes that are no image (data/normalize/inline_media.py): nothing written, the same
        # skip on both paths (a whole image would be written to <output>-media: test_hub_data.py)
        chat([{"type": "image", "image": "data:image/png;base64,aGVsbG8="}], "Inline."),
        *(chat(qwen(name), f"Fault {name}.") for name in image_corpus.FAULTS),
        {"messages": [
            {"role": "user", "content": "Take a photo."},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
             "function": {"name": "camera", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1",
             "content": [{"type": "image", "path": str(media / "wide.png")}]},
            {"role": "assistant", "content": "Tool image."}]},
        {"messages": [
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": qwen("square")},
            {"role": "assistant", "content": "Developer."}]},
    ]  # fmt: skip


#: the skips ``_form_rows`` must give on every path, by reason (data/normalize/media_forms.py,
#: data/render/media_faults.py); the missing file of ``_image_rows`` adds one more
FORM_SKIPS = {
    "2 <image> placeholders in the text but 1 files in the 'images' column": 1,
    "<image> placeholder in the text but no 'images' or 'image' column names its file": 1,
    "inline image (data: URI) holds bytes that are not an image file": 1,
    "[Errno 21] Is a directory: the image path names a folder": 1,
    "Failed to load image: not an image file Pillow can decode (or truncated)": 2,
    "image has more pixels than vLLM's limit (VLLM_MAX_IMAGE_PIXELS, 178956970)": 1,
}


@pytest.mark.vllm
@pytest.mark.parametrize("release", RENDER_RELEASES)
def test_image_rows_identical_locally_and_through_the_server(
    release: str, corpus: Any, servers: Any, tmp_path: Path
) -> None:
    media, models = corpus
    (tmp_path / "media").symlink_to(media)
    data = tmp_path / "images.jsonl"
    rows = _image_rows(media) + _form_rows(media)
    data.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    server = servers("dense")
    local = _prepare(release, models["dense"], tmp_path / "local", data, tmp_path)
    assert local.returncode == 0, local.stderr[-3000:]
    http = _prepare(
        release, models["dense"], tmp_path / "http", data, tmp_path,
        "--render-endpoint", server.url,
    )  # fmt: skip
    assert http.returncode == 0, http.stderr[-3000:]
    local_rows, http_rows = _arrow_rows(tmp_path / "local"), _arrow_rows(tmp_path / "http")
    assert local_rows == http_rows
    assert "messages" in local_rows[0]  # upstream keeps them for the multimodal processor
    assert not any("<image>" in json.dumps(row["messages"]) for row in local_rows)
    golden = image_corpus.load_golden("dense", vllm_server.VLLM_VERSION)
    count = {
        name: golden[f"one/{name}/full"]["ids"].count(image_corpus.IMAGE_PAD)
        for name in ("square", "wide", "photo", "tall")
    }
    pads = [row["input_ids"].count(image_corpus.IMAGE_PAD) for row in local_rows]
    first_turn = count["wide"] + count["photo"]
    expected = [count["square"], first_turn, first_turn + count["tall"], 0]  # _image_rows
    expected += [count["square"], count["wide"], count["photo"], count["tall"]]  # the forms
    expected += [count["tall"]]  # the Responses parts
    expected += [count["square"] + count["wide"], 0, count["wide"], count["square"]]
    assert sorted(pads) == sorted(expected)
    local_report = json.loads((tmp_path / "local" / "compat_report.json").read_text())
    http_report = json.loads((tmp_path / "http" / "compat_report.json").read_text())
    assert local_report["skipped"] == http_report["skipped"]
    want = {**FORM_SKIPS, image_corpus.MISSING_REASON: 1}
    assert local_report["skipped"] == want


@pytest.mark.vllm
@pytest.mark.parametrize("release", RENDER_RELEASES)
def test_eight_workers_through_the_server_write_one_workers_rows(
    release: str, corpus: Any, servers: Any, tmp_path: Path
) -> None:
    """A corpus in blocks (text chats, then image conversations: one kind per worker's shard)
    through ``--render-endpoint URL`` with the README's eight workers: the rows of one local
    worker, every column (``messages`` kept: the shards' types agree)."""
    media, models = corpus
    (tmp_path / "media").symlink_to(media)
    chats = [
        {"messages": [{"role": "user", "content": f"Count to {i}."},
                      {"role": "assistant", "content": " ".join(map(str, range(1, i + 2)))}]}
        for i in range(8)
    ]  # fmt: skip
    images = [row for row in _image_rows(media) + _form_rows(media) if "<image>" not in str(row)]
    data = tmp_path / "blocks.jsonl"
    data.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in chats + images))
    one = _prepare(release, models["dense"], tmp_path / "one", data, tmp_path)
    assert one.returncode == 0, one.stderr[-3000:]
    eight = _prepare(
        release, models["dense"], tmp_path / "eight", data, tmp_path,
        "--render-endpoint", servers("dense").url, workers=8,
    )  # fmt: skip
    assert eight.returncode == 0, eight.stderr[-3000:]
    assert _arrow_rows(tmp_path / "eight") == _arrow_rows(tmp_path / "one")


@pytest.mark.vllm
def test_server_without_local_media_fails_the_run_naming_the_flag(
    corpus: Any, tmp_path: Path
) -> None:
    media, models = corpus
    data = tmp_path / "images.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in _image_rows(media)[:2]))
    with image_corpus.start_server(models["dense"], None) as server:
        started = time.monotonic()
        run = _prepare(
            "0.9.0", models["dense"], tmp_path / "out", data, tmp_path,
            "--render-endpoint", server.url, retry=True,
        )  # fmt: skip
        took = time.monotonic() - started
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("speculators_qwen_compat: error: ")
    assert "start vLLM with --allowed-local-media-path DIR" in last  # the fix, not only the body
    assert took < 150  # fails at once: not after the 180 s retry budget
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def _doctor(model: Path, data: Path, cwd: Path, *extra: str) -> Any:
    command = [
        str(ROOT / "tools" / "release_python.sh"), "0.9.0", "vision", "-m",
        "speculators_qwen_compat", "doctor", "--model", str(model), "--data", str(data), *extra,
    ]  # fmt: skip
    return subprocess.run(
        command, capture_output=True, text=True, env=subprocess_env(), cwd=cwd, timeout=600
    )


@pytest.mark.vllm
def test_capped_server_agrees_with_the_flag_and_doctor_names_it(
    corpus: Any, tmp_path: Path
) -> None:
    """A server started with --mm-processor-kwargs (max_pixels): prepare_data through it and
    locally with the same --mm-processor-kwargs give identical rows, with the capped server's
    pads (golden); without the flag local rows differ; the flag sent to a server that does not
    trust per-request kwargs fails the run with one line; doctor --endpoint names the cap."""
    media, models = corpus
    cap = json.dumps(image_corpus.CAPS["max_pixels"])
    data = tmp_path / "images.jsonl"
    rows = [
        {"messages": [{"role": "user", "content": [
            {"type": "image", "image": str(media / f"{name}.png")},
            {"type": "text", "text": "What is it?"}]},
            {"role": "assistant", "content": f"A {name} one."}]}
        for name in ("large", "photo")
    ]  # fmt: skip
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    model = models["dense"]
    with image_corpus.start_server(model, media, "--mm-processor-kwargs", cap) as server:
        url = ("--render-endpoint", server.url)
        runs = {
            "http": _prepare("0.9.0", model, tmp_path / "http", data, tmp_path, *url),
            "capped": _prepare(
                "0.9.0", model, tmp_path / "capped", data, tmp_path, "--mm-processor-kwargs", cap
            ),
            "plain": _prepare("0.9.0", model, tmp_path / "plain", data, tmp_path),
            "refused": _prepare(
                "0.9.0", model, tmp_path / "refused", data, tmp_path, *url,
                "--mm-processor-kwargs", cap,
            ),
        }  # fmt: skip
        doctor = _doctor(model, data, tmp_path, "--endpoint", server.url)
        found = [line for line in doctor.stdout.splitlines() if "image pads" in line]
        assert found and "MISMATCH" in found[0], doctor.stdout + doctor.stderr[-2000:]
        suggested = found[0].split("--mm-processor-kwargs '")[1].split("'")[0]
        agreed = _doctor(
            model, data, tmp_path, "--endpoint", server.url, "--mm-processor-kwargs", suggested
        )
    for name in ("http", "capped", "plain"):
        assert runs[name].returncode == 0, (name, runs[name].stderr[-3000:])
    http, capped = _arrow_rows(tmp_path / "http"), _arrow_rows(tmp_path / "capped")
    assert http == capped
    golden = image_corpus.load_golden("dense", vllm_server.VLLM_VERSION)
    want = golden["capped/max_pixels/large"]["ids"].count(image_corpus.IMAGE_PAD)
    assert max(row["input_ids"].count(image_corpus.IMAGE_PAD) for row in http) == want
    plain = _arrow_rows(tmp_path / "plain")
    uncapped = golden["one/large/full"]["ids"].count(image_corpus.IMAGE_PAD)
    assert max(row["input_ids"].count(image_corpus.IMAGE_PAD) for row in plain) == uncapped
    refused = runs["refused"]
    assert refused.returncode != 0
    last = refused.stderr.strip().splitlines()[-1]
    assert (
        last.startswith("speculators_qwen_compat: error: ") and "--trust-request-mm-kwargs" in last
    )
    assert "through the server and locally" in agreed.stdout, agreed.stdout
    assert json.loads(suggested)["max_pixels"] <= image_corpus.CAPS["max_pixels"]["max_pixels"]


@pytest.mark.vllm
def test_an_image_url_the_server_cannot_fetch_is_one_counted_skip(
    corpus: Any, servers: Any, tmp_path: Path
) -> None:
    """vLLM answers a request whose image URL it cannot fetch with a 500 of its own words
    ("Cannot connect to host ..."): that conversation is skipped under those words and the run
    goes on (data/render/render_faults.py); upstream retried it as a server fault and failed the run
    after minutes."""
    from vllm_server import free_port

    media, models = corpus
    unreachable = f"http://127.0.0.1:{free_port()}/cat.png"  # nothing listens there
    rows = [
        _image_rows(media)[0],
        {"messages": [{"role": "user", "content": [{"type": "image", "url": unreachable},
                                                   {"type": "text", "text": "What?"}]},
                      {"role": "assistant", "content": "Never rendered."}]},
    ]  # fmt: skip
    (tmp_path / "media").symlink_to(media)
    data = tmp_path / "images.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    server = servers("dense")
    started = time.monotonic()
    run = _prepare(
        "0.9.0", models["dense"], tmp_path / "out", data, tmp_path,
        "--render-endpoint", server.url, retry=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert time.monotonic() - started < 150  # not retried for the 180 s budget
    report = json.loads((tmp_path / "out" / "compat_report.json").read_text())
    assert report["conversations_kept"] == 1 and report["errors"] == 0
    (reason,) = report["skipped"]
    assert reason.startswith("Cannot connect to host 127.0.0.1:"), reason
    assert report["skipped"][reason] == 1


def _hub_parquet(media: Path, path: Path) -> Path:
    """Two conversations as a Hub data set holds them: ``images: Sequence(Image())`` with each
    image's bytes under a bare name (datasets' schema, written with pyarrow: no Pillow)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from datasets import Features, Image, Sequence, Value

    def row(names: list[str], reply: str) -> dict[str, Any]:
        return {
            "messages": [{"role": "user", "content": "<image>" * len(names) + "Describe."},
                         {"role": "assistant", "content": reply}],
            "images": [{"bytes": (media / f"{n}.png").read_bytes(), "path": f"{n}.png"}
                       for n in names],
        }  # fmt: skip

    features = Features({
        "messages": [{"role": Value("string"), "content": Value("string")}],
        "images": Sequence(Image()),
    })  # fmt: skip
    rows = [row(["square"], "One."), row(["wide", "photo"], "Two.")]
    pq.write_table(pa.Table.from_pylist(rows, schema=features.arrow_schema), str(path))
    return path


@pytest.mark.vllm
def test_inline_images_through_the_server(corpus: Any, servers: Any, tmp_path: Path) -> None:
    """Parquet with ``Image()`` bytes through a real render server: the rows of local
    rendering when the server may read the media folder (it lies under its
    --allowed-local-media-path); else the run fails at once naming the flag, never a skip per
    conversation."""
    media, models = corpus
    data = _hub_parquet(media, tmp_path / "train.parquet")
    server = servers("dense")  # --allowed-local-media-path: the corpus' media folder
    inside = media / f"out-{tmp_path.name}"  # its media folder: media/out-...-media
    local = _prepare("0.9.0", models["dense"], tmp_path / "local", data, tmp_path)
    http = _prepare("0.9.0", models["dense"], inside, data, tmp_path, "--render-endpoint",
                    server.url)  # fmt: skip
    for run in (local, http):
        assert run.returncode == 0, run.stderr[-3000:]
    ids = [(r["input_ids"], r["loss_mask"]) for r in _arrow_rows(tmp_path / "local")]
    assert ids == [(r["input_ids"], r["loss_mask"]) for r in _arrow_rows(inside)]
    assert len(ids) == 2 and all(i.count(image_corpus.IMAGE_PAD) for i, _ in ids)
    started = time.monotonic()
    outside = _prepare("0.9.0", models["dense"], tmp_path / "http", data, tmp_path,
                       "--render-endpoint", server.url, retry=True)  # fmt: skip
    assert outside.returncode != 0 and time.monotonic() - started < 150
    last = outside.stderr.strip().splitlines()[-1]
    assert last.startswith("speculators_qwen_compat: error: ") and (
        f"cannot read the images this run wrote to {tmp_path / 'http-media'} or " in last
    ), last


@pytest.mark.vision
def test_an_image_value_named_like_another_file_here_renders_its_own_bytes(
    corpus: Any, tmp_path: Path
) -> None:
    """A Hub data set keeps each image's original file name beside its bytes; a file of that
    name in the data's folder (another image: an earlier export, a name every camera uses) must
    not stand in for the bytes the row holds. Oracle: the same parquet in a folder holding no
    such files (only the bytes can be used); the same rows naming the files by path show the
    clash would change the ids."""
    media, models = corpus
    plain, clash = tmp_path / "plain", tmp_path / "clash"
    for folder in (plain, clash):
        folder.mkdir()
        _hub_parquet(media, folder / "train.parquet")
    for name, other in (("square", "wide"), ("wide", "photo"), ("photo", "square")):
        (clash / f"{name}.png").write_bytes((media / f"{other}.png").read_bytes())
    ids = {}
    for folder in (plain, clash):
        out = tmp_path / f"out-{folder.name}"
        run = _prepare("0.9.0", models["dense"], out, folder / "train.parquet", folder)
        assert run.returncode == 0, run.stderr[-3000:]
        ids[folder.name] = [row["input_ids"] for row in _arrow_rows(out)]
    assert len(ids["plain"]) == 2
    assert ids["clash"] == ids["plain"]

    by_path = clash / "paths.jsonl"
    turns = [
        {"role": "user", "content": "<image>Describe."},
        {"role": "assistant", "content": "One."},
    ]
    two = [{"role": "user", "content": "<image><image>Describe."},
           {"role": "assistant", "content": "Two."}]  # fmt: skip
    by_path.write_text(
        json.dumps({"messages": turns, "images": ["square.png"]}) + "\n"
        + json.dumps({"messages": two, "images": ["wide.png", "photo.png"]}) + "\n"
    )  # fmt: skip
    run = _prepare("0.9.0", models["dense"], tmp_path / "out-paths", by_path, clash)
    assert run.returncode == 0, run.stderr[-3000:]
    assert [row["input_ids"] for row in _arrow_rows(tmp_path / "out-paths")] != ids["plain"]
