"""The image part of the vLLM parity corpus: render requests with images, and the golden ids.

Each case is a ``/v1/chat/completions/render`` request as speculators 0.8.1/0.9.0 send it for
image data: upstream's ``_adapt_part_for_vllm`` has turned ``{"type": "image", "path"|"url"}``
into ``{"type": "image_url", "image_url": {"url": "file://..."}}`` (from a path: ``file://`` +
the absolute path, unquoted; a URL as given). Covered: several image sizes (one below the
processor's minimum, one above its maximum, one with an aspect ratio the processor refuses),
several images in one turn, images in later turns, a file name with a space raw and quoted, a
missing file, a literal ``<|image_pad|>`` in the text before an image, an image in a system turn
(the template refuses it), 0.9's right-side truncation keeping, splitting and dropping an
image, and words of the real vocabulary that only vLLM's tokenizer class splits (with and
without an image: data/render/vllm_tokenizer.py).

Two tiny composite checkpoints (weight-less folders: config.json of transformers'
``Qwen3_5Config`` / ``Qwen3_5MoeConfig`` at the vLLM sizes of tests/tiny_checkpoints.py, the real
Qwen3.6 vocabulary, the Qwen3.6-style template, the processor files), one per way a
preprocessor_config.json gives the pixel limits: ``dense`` with ``min_pixels``/``max_pixels``,
``moe`` with ``size.shortest_edge``/``longest_edge`` (the form Qwen3-VL checkpoints ship, a
smaller maximum).

Images are PNGs written here with the standard library (deterministic bytes, no Pillow in the
CPU venvs); the server and transformers' processor decode them.

Golden answers recorded from the real server live in
tests/golden/vllm-<version>/images-<kind>.json (``python tests/image_corpus.py record [KIND ...]``
with the vLLM venv built; tests/test_vllm_images.py re-renders on every run with the server and
fails on any drift). The request holds absolute
paths; the golden entry holds only ids or a status, so it does not depend on where the images
are.
"""

from __future__ import annotations

import dataclasses
import re
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

import parity_corpus

HERE = Path(__file__).resolve().parent
KINDS = {"dense": "qwen35", "moe": "qwen35_moe"}
#: preprocessor_config.json's pixel limits per kind (both forms transformers reads).
LIMITS: dict[str, dict[str, Any]] = {
    "dense": {"min_pixels": 4096, "max_pixels": 200_704},
    # the form Qwen3-VL checkpoints ship (their longest_edge, 16,777,216, makes vLLM's start-up
    # warm-up process an image that large: minutes on 2 CPUs)
    "moe": {"size": {"shortest_edge": 65_536, "longest_edge": 1_048_576}},
}
#: name -> (width, height)
IMAGES = {
    "square": (64, 64),
    "wide": (128, 96),
    "photo": (300, 200),
    "tall": (200, 330),
    "pixel": (1, 1),
    "sliver": (2, 500),  # aspect ratio above 200: the processor refuses it
    "large": (1200, 1000),  # above the dense kind's max_pixels
    "with space": (96, 64),
}
MISSING = "missing"  # a file that is not there
MISSING_REASON = "[Errno 2] No such file or directory: '<path>'"  # counted on both paths
#: files vLLM cannot use (data/render/media_faults.py): name -> how it is written (``write_faults``)
FAULTS = ("folder", "not_image", "truncated", "huge")
HUGE = (20_000, 10_000)  # 200 M pixels: above vLLM's 178,956,970 limit, below Pillow's 2x bomb
#: a server's pixel caps as vLLM takes them per request (its --mm-processor-kwargs values)
CAPS = {
    "max_pixels": {"max_pixels": 65_536},
    "size": {"size": {"longest_edge": 65_536, "shortest_edge": 4_096}},
}
WORDS = "加拿大\n新加坡\n俱乐部\n众所周知"  # each word alone on its line: one pre-token
SERVER_START = 900.0  # seconds a composite model's render server may take to start
IMAGE_PAD = 248056  # <|image_pad|> in the real vocabulary (transformers' default image_token_id)


def png(path: Path, width: int, height: int) -> Path:
    """An RGB PNG of ``width`` x ``height``, a gradient (deterministic bytes)."""
    rows = b"".join(
        b"\x00" + bytes((x * 7 + y) % 256 for x in range(width) for _ in range(3))
        for y in range(height)
    )

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )  # fmt: skip
    return path


def write_images(folder: Path) -> Path:
    """Every image of ``IMAGES`` as ``folder/<name>.png``, and the ``FAULTS`` files."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, (width, height) in IMAGES.items():
        png(folder / f"{name}.png", width, height)
    write_faults(folder)
    return folder


def write_faults(folder: Path) -> None:
    """``folder.png`` a folder; ``not_image.png`` text; ``truncated.png`` the first half of a
    PNG; ``huge.png`` a whole black PNG of ``HUGE`` pixels (about 200 KB, streamed)."""
    (folder / "folder.png").mkdir(exist_ok=True)
    (folder / "not_image.png").write_text("not an image\n")
    whole = png(folder / "truncated.png", 300, 200).read_bytes()
    (folder / "truncated.png").write_bytes(whole[: len(whole) // 2])
    width, height = HUGE
    packer = zlib.compressobj(9)
    row = b"\x00" * (1 + width * 3)
    body = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    (folder / "huge.png").write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b"")
    )


def model_folder(dest: Path, kind: str, vocab: Path) -> Path:
    """A weight-less ``kind`` checkpoint folder that vLLM's render server and AutoProcessor
    load as the composite Qwen3.5/3.6 model, with the real vocabulary."""
    import tiny_checkpoints as tiny

    from speculators_qwen_compat import demo

    sizes = dataclasses.replace(
        tiny.VLLM, vocab=248_320, max_positions=262_144,
        special_ids=(("eos_token_id", 248_046), ("pad_token_id", 248_044)),
    )  # fmt: skip
    _, config = tiny.model_class_and_config(KINDS[kind], sizes)
    dest.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(dest)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (dest / name).write_bytes((vocab / name).read_bytes())
    (dest / "chat_template.jinja").write_text(demo.chat_template("qwen36"), encoding="utf-8")
    tiny.write_processor_files(dest, LIMITS[kind])
    return dest


def image_part(media: Path, name: str, quoted: bool = False) -> dict[str, Any]:
    """The part upstream sends for an image: ``file://`` + the absolute path (unquoted, as
    ``_adapt_part_for_vllm`` makes it from a path), or percent-quoted (a URL a user wrote)."""
    from urllib.parse import quote

    path = str(media / f"{name}.png")
    return {
        "type": "image_url",
        "image_url": {"url": "file://" + (quote(path) if quoted else path)},
    }


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def _conversations(media: Path) -> dict[str, list[dict[str, Any]]]:
    def user(*parts: Any) -> dict[str, Any]:
        return {"role": "user", "content": list(parts)}

    def assistant(text: str) -> dict[str, Any]:
        return {"role": "assistant", "content": text}

    img = lambda name, quoted=False: image_part(media, name, quoted)  # noqa: E731
    out = {
        f"one/{name}": [user(img(name), _text("What is in this picture? 40 × 12")),
                        assistant("A gradient, 480 px.")]
        for name in IMAGES
        if name != "with space"
    }  # fmt: skip
    out.update(
        {
            "space_raw": [user(img("with space"), _text("And this?")), assistant("Stripes.")],
            "space_quoted": [
                user(img("with space", quoted=True), _text("And this?")),
                assistant("Stripes."),
            ],
            "missing_file": [user(img(MISSING), _text("Describe.")), assistant("Nothing.")],
            "two_in_one_turn": [
                user(img("square"), img("wide"), _text("Compare the two.")),
                assistant("The second is wider."),
            ],
            "text_between": [
                user(_text("First:"), img("photo"), _text("second:"), img("pixel")),
                assistant("Two pictures."),
            ],
            "later_turns": [
                {"role": "system", "content": "You describe images."},
                user(img("wide"), _text("One.")),
                assistant("A wide one."),
                user(_text("And now"), img("tall")),
                assistant("A tall one."),
                user(_text("Thanks, no picture this time.")),
                assistant("You are welcome."),
            ],
            "literal_pad_first": [
                user(_text("the token <|image_pad|> then"), img("square")),
                assistant("Ok."),
            ],
            # words the real vocabulary holds whole that vLLM's tokenizer class splits
            # (data/render/vllm_tokenizer.py): text only, and beside an image
            "vocab_words": [user(_text(WORDS)), assistant("在新加坡的俱乐部。")],
            "vocab_words_image": [user(img("wide"), _text(WORDS)), assistant("加拿大。")],
            "system_image": [
                {"role": "system", "content": [img("square"), _text("Look.")]},
                user(_text("Hi")),
                assistant("Hello."),
            ],
            # an image in a tool result (the template wraps it in <tool_response>)
            "tool_image": [
                user(_text("Take a photo.")),
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "camera", "arguments": "{}"},
                        }
                    ],
                },
                {
                    "role": "tool",
                    "tool_call_id": "call_1",
                    "content": [img("wide"), _text("photo taken")],
                },
                assistant("It is wide."),
            ],
            # developer turns: vLLM makes them system and merges them with the system turns
            "developer_image": [
                {"role": "developer", "content": "Be brief."},
                user(img("square"), _text("What?")),
                assistant("A square."),
            ],
            "system_developer_image": [
                {"role": "system", "content": "You describe images."},
                {"role": "developer", "content": "Be brief."},
                user(img("square"), _text("What?")),
                assistant("A square."),
            ],
            "developer_holds_image": [
                {"role": "system", "content": "You describe images."},
                {"role": "developer", "content": [img("square"), _text("Be brief.")]},
                user(_text("What?")),
                assistant("A square."),
            ],
        }
    )
    for name in FAULTS:  # files vLLM cannot use: counted skips on both paths
        out[f"fault/{name}"] = [user(img(name), _text("Describe.")), assistant("Nothing.")]
    return out


def cases(media: Path) -> dict[str, dict[str, Any]]:
    """Render requests by name: prompt and full renders of every conversation, plus 0.9's
    truncation keeping, splitting and dropping an image."""
    out: dict[str, dict[str, Any]] = {}
    for name, messages in _conversations(media).items():
        last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
        out[f"{name}/full"] = {"messages": messages, "add_generation_prompt": False}
        out[f"{name}/prompt"] = {"messages": messages[:last], "add_generation_prompt": True}
    later = out["later_turns/full"]
    for n in (2048, 60, 30, 8):  # keeps all; cuts the second image; the first; drops both
        out[f"later_turns/truncate_right_{n}"] = {
            **later, "truncate_prompt_tokens": n, "truncation_side": "right",
        }  # fmt: skip
    # the boundary: the text (one placeholder per image) fits in 64 tokens, the expanded image
    # does not
    out["boundary/truncate_right_64"] = {
        **out["one/photo/full"], "truncate_prompt_tokens": 64, "truncation_side": "right",
    }  # fmt: skip
    for cap, kwargs in CAPS.items():  # a capped server, per request
        for name in ("large", "photo"):
            out[f"capped/{cap}/{name}"] = {**out[f"one/{name}/full"], "mm_processor_kwargs": kwargs}
    return out


def golden_name(kind: str) -> str:
    """The golden file's name beside the text corpus' (parity_corpus.golden_path)."""
    return f"images-{kind}"


def server_answers(media: Path, render: Any) -> dict[str, Any]:
    """Every case rendered by ``render`` (a server's POST: status, JSON), as golden entries."""
    return {
        name: _path_masked(parity_corpus.answer_of(*render(parity_corpus.server_body(case))))
        for name, case in cases(media).items()
    }


#: vLLM names a missing file with its path partly masked, how much depending on where the file
#: lies (``'<path>'`` under /tmp, ``'/some/dir/build<path>'`` deeper), and other files by their
#: path or an object's address: golden entries keep the kind, not where the test ran.
_MISSING = re.compile(r"(No such file or directory: )'[^']*'")
_PATH = re.compile(r"'/[^']*'")
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def _path_masked(answer: dict[str, Any]) -> dict[str, Any]:
    if isinstance(answer.get("message"), str):
        message = _MISSING.sub(r"\1'<path>'", answer["message"])
        answer["message"] = _ADDRESS.sub(" at 0x<address>", _PATH.sub("'<path>'", message))
    return answer


def load_golden(kind: str, version: str) -> dict[str, Any]:
    return parity_corpus.load_golden(golden_name(kind), version)


#: the corpus server takes per-request mm_processor_kwargs (the ``capped/`` cases); vLLM 0.32
#: refuses them (400) without this flag
TRUST_KWARGS = "--trust-request-mm-kwargs"


def start_server(model: Path, media: Path | None, *flags: str) -> Any:
    """The render server for a composite checkpoint (vLLM's qwen3_5 model needs torchvision),
    reading local images under ``media`` (None: without --allowed-local-media-path), started
    with ``flags`` (default: ``TRUST_KWARGS``)."""
    import vllm_server

    extra = ("--allowed-local-media-path", str(media)) if media is not None else ()
    extra += flags or (TRUST_KWARGS,)
    # a composite model's start-up warms the processor up on a largest image: 10-20 s idle,
    # minutes with every core busy
    return vllm_server.start(model, extra_args=extra, torchvision=True, timeout=SERVER_START)


def record(kinds: tuple[str, ...] = tuple(KINDS)) -> None:
    """Render every case on the real server and write the golden files."""
    import tempfile

    import vllm_server
    from qwen_vocab import vocab_dir

    for kind in kinds:
        with tempfile.TemporaryDirectory() as tmp:
            media = write_images(Path(tmp) / "media")
            model = model_folder(Path(tmp) / "model", kind, vocab_dir())
            with start_server(model, media) as server:
                answers = server_answers(media, server.render)
        path = parity_corpus.write_golden(golden_name(kind), vllm_server.VLLM_VERSION, answers)
        print(f"wrote {path} ({len(answers)} cases)")


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    if sys.argv[1:2] != ["record"] or not set(sys.argv[2:]) <= set(KINDS):
        raise SystemExit(f"usage: image_corpus.py record [{'|'.join(KINDS)} ...]")
    record(tuple(sys.argv[2:]) or tuple(KINDS))
