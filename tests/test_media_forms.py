"""The forms people hold images in, as the normaliser hands them to every path
(data/normalize/media_forms.py).

The expected parts are written here by hand from the formats' documentation (Qwen3.6 model card
and qwen-vl-utils, LLaVA, LLaMA-Factory's ``images``/``videos`` with ``<image>``/``<video>``) and
upstream's adapter (``{"type": kind, "path"|"url"}``); the pads each form gets are checked
against the real vLLM server and transformers' processor in tests/test_vllm_images.py and
tests/processor/test_image_parts.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from speculators_qwen_compat.core.run_options import RUN_ENV, RunOptions
from speculators_qwen_compat.data.normalize import inline_media
from speculators_qwen_compat.data.normalize.media_forms import for_vllm
from speculators_qwen_compat.data.normalize.normalize import BadConversation, normalize_row
from speculators_qwen_compat.data.render import media_faults

pytestmark = pytest.mark.pure

#: the files the rows below name by relative path (made in the test's working directory)
FILES = ("cat.png", "clip.mp4", "coco/1.jpg", "a.jpg", "b.jpg", "c.jpg", "v.mp4", "a.png")


@pytest.fixture(autouse=True)
def in_data_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run each test in a folder holding FILES, with no media folder and no --media-dir."""
    for name in FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(RUN_ENV, raising=False)
    return tmp_path


def at(name: str) -> str:
    """A relative path as the normaliser resolves it here (against the working directory)."""
    return str(Path.cwd() / name)


def _user(row: dict[str, Any], source: str | None = None) -> Any:
    return normalize_row(row, source=source).conversation[0]["content"]


def _chat(content: Any, **row: Any) -> dict[str, Any]:
    turns = [{"role": "user", "content": content}, {"role": "assistant", "content": "ok"}]
    return {**row, "messages": turns}


TEXT = {"type": "text", "text": "What?"}


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        ({"type": "image", "image": "cat.png"}, "cat.png"),
        ({"type": "image", "image": "file:///d/cat.png"}, {"type": "image", "url": "file:///d/cat.png"}),
        ({"type": "image", "image": "https://h/cat.png"}, {"type": "image", "url": "https://h/cat.png"}),
        ({"type": "video", "video": "clip.mp4"}, "clip.mp4"),
        ({"type": "image_url", "image_url": "file:///d/a.png"}, {"type": "image", "url": "file:///d/a.png"}),
        ({"type": "image_url", "image_url": {"url": "file:///d/a.png"}}, {"type": "image", "url": "file:///d/a.png"}),
        ({"type": "image", "path": "cat.png"}, "cat.png"),
    ],
)  # fmt: skip
def test_parts_become_upstreams_form(part: dict[str, Any], expected: Any) -> None:
    if isinstance(expected, str):  # a relative path: made absolute (data/normalize/media_paths.py)
        expected = {"type": part["type"], "path": at(expected)}
    assert _user(_chat([part, TEXT])) == [expected, TEXT]


def test_llava_column_fills_the_placeholder() -> None:
    row = {
        "image": "coco/1.jpg",
        "conversations": [
            {"from": "human", "value": "<image>\nWhat is it?"},
            {"from": "gpt", "value": "A cat."},
        ],
    }
    assert _user(row) == [
        {"type": "image", "path": at("coco/1.jpg")},
        {"type": "text", "text": "\nWhat is it?"},
    ]


def test_llama_factory_columns_fill_placeholders_in_order_over_turns() -> None:
    row = {
        "images": ["a.jpg", "b.jpg", "c.jpg"],
        "videos": ["v.mp4"],
        "messages": [
            {"role": "system", "content": "Look."},
            {"role": "user", "content": "<image>left, <image>right"},
            {"role": "assistant", "content": "Two."},
            {"role": "user", "content": [{"type": "text", "text": "and <video> with <image>"}]},
            {"role": "assistant", "content": "Both."},
        ],
    }
    turns = normalize_row(row).conversation
    assert turns[1]["content"] == [
        {"type": "image", "path": at("a.jpg")},
        {"type": "text", "text": "left, "},
        {"type": "image", "path": at("b.jpg")},
        {"type": "text", "text": "right"},
    ]
    assert turns[3]["content"] == [
        {"type": "text", "text": "and "},
        {"type": "video", "path": at("v.mp4")},
        {"type": "text", "text": " with "},
        {"type": "image", "path": at("c.jpg")},
    ]


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (_chat("<image><image>Compare", images=["a.jpg"]),
         "2 <image> placeholders in the text but 1 files in the 'images' column"),
        (_chat("Compare", images=["a.jpg"]),
         "0 <image> placeholders in the text but 1 files in the 'images' column"),
        (_chat("<image> what is it?"),
         "<image> placeholder in the text but no 'images' or 'image' column names its file"),
        (_chat("<video> what is it?", images=[]),
         "<video> placeholder in the text but no 'videos' or 'video' column names its file"),
        (_chat([{"type": "image", "image": "data:image/png;base64,iVBO"}]),
         "inline image (data: URI): prepare_data writes such images to a media folder beside "
         "--output; this run has none (run python -m speculators_qwen_compat.prepare_data), or "
         "give file paths"),
        (_chat("<image>", images=["missing.jpg"]),
         "[Errno 2] No such file or directory: relative media path resolved against the working "
         "directory <cwd> (name the folder with --media-dir)"),
        (_chat([{"type": "video", "video": ["f1.jpg", "f2.jpg"]}]),
         "video given as a list of frames (the qwen-vl-utils form): vLLM renders a video file "
         "(video_url), not frames; give the video's path or URL"),
        (_chat([{"type": "input_image", "file_id": "file-1"}]),
         "Responses API input_image with a file_id (an uploaded file): give the image's path, "
         "URL or data: URI"),
    ],
)  # fmt: skip
def test_rows_that_cannot_be_read_are_skips_with_reasons(row: dict[str, Any], reason: str) -> None:
    with pytest.raises(BadConversation) as raised:
        normalize_row(row)
    assert str(raised.value) == reason.replace("<cwd>", str(Path.cwd()))


def test_placeholder_in_an_assistant_reply_stays_text() -> None:
    row = {
        "messages": [
            {"role": "user", "content": "Show a video tag."},
            {"role": "assistant", "content": "<video> plays media."},
        ]
    }
    assert normalize_row(row).conversation[1]["content"] == "<video> plays media."


def test_bare_image_parts_take_the_column_in_order() -> None:
    row = _chat([{"type": "image"}, TEXT, {"type": "image"}], images=["a.jpg", "b.jpg"])
    assert _user(row) == [
        {"type": "image", "path": at("a.jpg")},
        TEXT,
        {"type": "image", "path": at("b.jpg")},
    ]


def test_for_vllm_sends_what_upstreams_adapter_sends() -> None:
    turns = normalize_row(_chat([{"type": "image", "image": "a.png"}, TEXT])).conversation
    sent = for_vllm(turns)[0]["content"]
    url = f"file://{Path.cwd() / 'a.png'}"
    assert sent == [{"type": "image_url", "image_url": {"url": url}}, TEXT]


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        # vLLM 0.32's answers (tests/golden/vllm-0.32.0/images-dense.json) and Pillow's errors
        ("[Errno 2] No such file or directory: '/w/x/build<path>'", media_faults.MISSING_FILE),
        ("[Errno 21] Is a directory: '/tmp/m/folder.png'", media_faults.FOLDER),
        ("Failed to load image: cannot identify image file <_io.BytesIO object>",
         media_faults.UNREADABLE),
        ("cannot identify image file '/tmp/m/not_image.png'", media_faults.UNREADABLE),
        ("Failed to load image: image file is truncated", media_faults.UNREADABLE),
        ("Image size (200000000 pixels) exceeds limit of 178956970 pixels, could be decompression "
         "bomb DOS attack.", media_faults.TOO_LARGE),
        ("Failed to apply Qwen3VLProcessor on data={'text': '...'}", media_faults.REFUSED),
        ("absolute aspect ratio must be smaller than 200, got 250.0", media_faults.REFUSED),
        ("Failed to apply prompt replacement for mm_items['image'][0]", media_faults.NOT_WHOLE),
        ("truncate_prompt_tokens=60 would split or drop a(n) image item, which spans",
         media_faults.NOT_WHOLE),
        ("No user query found in messages.", None),
    ],
)  # fmt: skip
def test_one_rule_names_media_faults(message: str, reason: str | None) -> None:
    assert media_faults.reason(message) == reason


def test_placeholder_in_the_system_column_is_a_skip_not_text() -> None:
    """LLaMA-Factory's ``system`` column becomes a system turn: a literal ``<image>`` there with
    no file named would reach the drafter as text the verifier never sees (module docstring)."""
    row = {**_chat("q"), "system": "You see <image>"}
    with pytest.raises(BadConversation) as raised:
        normalize_row(row)
    assert str(raised.value) == (
        "<image> placeholder in the text but no 'images' or 'image' column names its file"
    )


def _png(tmp_path: Path, width: int, height: int) -> bytes:
    import image_corpus

    return image_corpus.png(tmp_path / f"p{width}x{height}.png", width, height).read_bytes()


def test_inline_images_are_written_once_by_content(tmp_path: Path, monkeypatch: Any) -> None:
    """Every inline form (data/normalize/inline_media.py) names one file per distinct image,
    under its content's sha256, in the run's media folder; the second row writes nothing new."""
    import base64
    import hashlib

    media = tmp_path / "out-media"
    monkeypatch.setenv(RUN_ENV, RunOptions(inline_media_dir=str(media)).to_json())
    data = _png(tmp_path, 8, 6)
    encoded = base64.b64encode(data).decode()
    expected = str(media / f"{hashlib.sha256(data).hexdigest()}.png")
    forms = [
        {"type": "image", "image": f"data:image/png;base64,{encoded}"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded}"}},
        {"type": "input_image", "image_url": f"data:image/png;base64,{encoded}"},
        {"type": "image", "base64": encoded},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": encoded}},
        {"type": "image", "image": {"bytes": encoded, "path": "0001.png"}},  # Image() as JSON
    ]
    for part in forms:
        assert _user(_chat([part, TEXT])) == [{"type": "image", "path": expected}, TEXT], part
    column = _chat("<image>", images=[{"bytes": encoded, "path": None}])
    assert _user(column) == [{"type": "image", "path": expected}]
    assert sorted(p.name for p in media.iterdir()) == [Path(expected).name]
    assert Path(expected).read_bytes() == data


def test_an_image_value_with_a_usable_path_uses_the_path(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv(RUN_ENV, RunOptions(inline_media_dir=str(tmp_path / "out-media")).to_json())
    (tmp_path / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n")  # the value's own bytes
    row = _chat(
        "<image>",
        images=[
            {"bytes": "iVBORw0KGgo=", "path": "a.png"},
        ],
    )
    assert _user(row) == [{"type": "image", "path": at("a.png")}]
    assert not (tmp_path / "out-media").exists()


def test_bytes_that_are_not_an_image_are_a_skip(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv(RUN_ENV, RunOptions(inline_media_dir=str(tmp_path / "out-media")).to_json())
    with pytest.raises(BadConversation) as raised:
        normalize_row(_chat("<image>", images=[{"bytes": "aGVsbG8=", "path": None}]))
    assert str(raised.value) == (
        "inline image (Image() bytes in the 'images' column) holds bytes that are not an image file"
    )


def test_anthropic_blocks_are_image_parts_not_placeholders() -> None:
    url = {"type": "image", "source": {"type": "url", "url": "https://h/x.png"}}
    assert _user(_chat([url, TEXT])) == [{"type": "image", "url": "https://h/x.png"}, TEXT]
    with pytest.raises(BadConversation) as raised:
        normalize_row(_chat([{"type": "image", "source": {"type": "file", "file_id": "f"}}]))
    assert "Anthropic image source block of type 'file'" in str(raised.value)


def test_relative_paths_resolve_against_the_data_files_folder_then_the_cwd(
    tmp_path: Path, monkeypatch: Any
) -> None:
    data = tmp_path / "llava"
    (data / "coco").mkdir(parents=True)
    (data / "coco" / "2.jpg").write_bytes(b"")
    source = f"{data / 'chat.jsonl'}:3"
    (data / "chat.jsonl").write_text("{}\n")
    # the row's source travels with it: normalize_row(..., source) (data/normalize/batch.py)
    assert _user(_chat("<image>", image="coco/2.jpg"), source) == [
        {"type": "image", "path": str(data / "coco" / "2.jpg")}
    ]
    # not in the data file's folder, in the working directory: found there
    assert _user(_chat("<image>", image="coco/1.jpg"), source) == [
        {"type": "image", "path": at("coco/1.jpg")}
    ]
    with pytest.raises(BadConversation) as raised:
        normalize_row(_chat("<image>", image="coco/3.jpg"), source=source)
    assert str(raised.value) == (
        "[Errno 2] No such file or directory: relative media path resolved against the data "
        f"file's folder {data} and the working directory {tmp_path} (name the folder with "
        "--media-dir)"
    )
    assert raised.value.detail == f"'coco/3.jpg' -> {tmp_path / 'coco/3.jpg'}"
    monkeypatch.setenv(RUN_ENV, RunOptions(media_root=str(data)).to_json())
    assert _user(_chat("<image>", image="coco/2.jpg")) == [
        {"type": "image", "path": str(data / "coco" / "2.jpg")}
    ]
    with pytest.raises(BadConversation) as raised:
        normalize_row(_chat("<image>", image="coco/1.jpg"))
    assert f"resolved against --media-dir {data} " in str(raised.value)


def test_an_image_value_holding_only_a_path_resolves_as_a_path() -> None:
    """``Image(decode=False)``'s ``{"path": P, "bytes": None}``: the path, resolved (a miss
    says where it looked), never "not a data problem"."""
    part = {"type": "image", "image": {"path": "a.png", "bytes": None}}
    assert _user(_chat([part, TEXT])) == [{"type": "image", "path": at("a.png")}, TEXT]
    with pytest.raises(BadConversation) as raised:
        normalize_row(_chat([{"type": "image", "image": {"path": "gone.png"}}]))
    assert str(raised.value).startswith("[Errno 2] No such file or directory: relative media")


def test_a_videos_column_of_frame_lists_is_a_skip_naming_the_form() -> None:
    with pytest.raises(BadConversation) as raised:
        normalize_row(_chat("<video>", videos=[["f1.jpg", "f2.jpg"]]))
    assert "list of frames (qwen-vl-utils video form)" in str(raised.value)


def test_an_image_value_uses_its_path_only_when_the_file_holds_its_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``{"bytes": B, "path": "x.png"}`` with another image named x.png in the working
    directory: the dataset's own bytes are used (written to the media folder), never the other
    file; a file holding exactly B is used by its path."""
    import hashlib

    from image_corpus import png

    media = tmp_path / "media"
    monkeypatch.setenv(RUN_ENV, RunOptions(inline_media_dir=str(str(media))).to_json())
    # whole images (Pillow, where installed, checks an inline image before it is written)
    ours = png(tmp_path / "ours.png", 8, 4).read_bytes()
    other = png(tmp_path / "other.png", 4, 8).read_bytes()
    Path("x.png").write_bytes(other)
    part = {"type": "image", "image": {"bytes": ours, "path": "x.png"}}
    got = _user(_chat([part, TEXT]))[0]["path"]
    assert got == str(media / f"{hashlib.sha256(ours).hexdigest()}.png")
    assert Path(got).read_bytes() == ours
    Path("x.png").write_bytes(ours)
    assert _user(_chat([part, TEXT]))[0] == {"type": "image", "path": at("x.png")}


def test_responses_text_parts_are_text_and_other_parts_a_named_skip() -> None:
    """OpenAI Responses' ``input_text``/``output_text`` parts are read as text (placeholders in
    them too); a part type nothing reads is a skip naming it, never "not a data problem"."""
    row = _chat([{"type": "input_text", "text": "Hi <image>"}], image="cat.png")
    assert _user(row) == [{"type": "text", "text": "Hi "}, {"type": "image", "path": at("cat.png")}]
    turns = [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
             {"role": "assistant", "content": [{"type": "output_text", "text": "Yo"}]}]  # fmt: skip
    got = normalize_row({"messages": turns}).conversation
    assert got[1]["content"] == [{"type": "text", "text": "Yo"}]
    with pytest.raises(BadConversation) as raised:
        normalize_row(_chat([{"type": "input_audio", "input_audio": {"data": "x"}}]))
    assert str(raised.value).startswith("a content part of type 'input_audio'")


def test_a_killed_writers_temporary_files_are_swept_and_nothing_else(tmp_path: Path) -> None:
    """A run killed while writing an image leaves ``.incoming-HOST-PID-*``; the next run over
    the same --output removes those of dead writers on this host, and only those."""
    import socket
    import subprocess
    import sys

    media = inline_media.folder_for(tmp_path / "out")
    media.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    host = socket.gethostname()
    left = media / f".incoming-{host}-{dead.stdout.strip()}-abc"
    live = media / f".incoming-{host}-{os.getpid()}-def"
    elsewhere = media / ".incoming-otherhost-1-ghi"
    image = media / "0123.png"
    for path in (left, live, elsewhere, image):
        path.write_bytes(b"x")
    inline_media.choose_folder(tmp_path / "out")
    assert sorted(p.name for p in media.iterdir()) == sorted(
        p.name for p in (live, elsewhere, image)
    )
