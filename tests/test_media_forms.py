"""The forms people hold images in, as the normaliser hands them to every path
(data/media_forms.py).

The expected parts are written here by hand from the formats' documentation (Qwen3.6 model card
and qwen-vl-utils, LLaVA, LLaMA-Factory's ``images``/``videos`` with ``<image>``/``<video>``) and
upstream's adapter (``{"type": kind, "path"|"url"}``); the pads each form gets are checked
against the real vLLM server and transformers' processor in tests/test_vllm_images.py and
tests/processor/test_image_parts.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from speculators_qwen_compat.data import media_faults
from speculators_qwen_compat.data.media_forms import for_vllm
from speculators_qwen_compat.data.normalize import BadConversation, normalize_row

pytestmark = pytest.mark.pure


def _user(row: dict[str, Any]) -> Any:
    return normalize_row(row).conversation[0]["content"]


def _chat(content: Any, **row: Any) -> dict[str, Any]:
    turns = [{"role": "user", "content": content}, {"role": "assistant", "content": "ok"}]
    return {**row, "messages": turns}


TEXT = {"type": "text", "text": "What?"}
INLINE = "inline (base64) media in content; give file paths or URLs"


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        ({"type": "image", "image": "cat.png"}, {"type": "image", "path": "cat.png"}),
        ({"type": "image", "image": "file:///d/cat.png"}, {"type": "image", "url": "file:///d/cat.png"}),
        ({"type": "image", "image": "https://h/cat.png"}, {"type": "image", "url": "https://h/cat.png"}),
        ({"type": "video", "video": "clip.mp4"}, {"type": "video", "path": "clip.mp4"}),
        ({"type": "image_url", "image_url": "file:///d/a.png"}, {"type": "image", "url": "file:///d/a.png"}),
        ({"type": "image_url", "image_url": {"url": "file:///d/a.png"}}, {"type": "image", "url": "file:///d/a.png"}),
        ({"type": "image", "path": "cat.png"}, {"type": "image", "path": "cat.png"}),
    ],
)  # fmt: skip
def test_parts_become_upstreams_form(part: dict[str, Any], expected: dict[str, Any]) -> None:
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
        {"type": "image", "path": "coco/1.jpg"},
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
        {"type": "image", "path": "a.jpg"},
        {"type": "text", "text": "left, "},
        {"type": "image", "path": "b.jpg"},
        {"type": "text", "text": "right"},
    ]
    assert turns[3]["content"] == [
        {"type": "text", "text": "and "},
        {"type": "video", "path": "v.mp4"},
        {"type": "text", "text": " with "},
        {"type": "image", "path": "c.jpg"},
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
        (_chat([{"type": "image", "image": "data:image/png;base64,iVBO"}]), INLINE),
        (_chat("<image>", images=[{"bytes": b"\x89PNG", "path": None}]), INLINE),
        (_chat("<image>", images=["data:image/png;base64,iVBO"]), INLINE),
    ],
)  # fmt: skip
def test_rows_that_cannot_be_read_are_skips_with_reasons(row: dict[str, Any], reason: str) -> None:
    with pytest.raises(BadConversation) as raised:
        normalize_row(row)
    assert str(raised.value) == reason


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
        {"type": "image", "path": "a.jpg"},
        TEXT,
        {"type": "image", "path": "b.jpg"},
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
