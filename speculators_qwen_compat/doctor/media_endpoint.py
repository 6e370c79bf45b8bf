"""``doctor --endpoint URL --data D``: does the server count image pads as this run will?

Why: a server started with pixel caps gives fewer pads than local rendering without them, and
upstream's ``--validate-outputs`` rejects the rows (docs/images.md, "Pixel caps"). One image
conversation is rendered both ways; on a difference the ``max_pixels`` that agrees is named.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, TextIO

from speculators_qwen_compat.core.errors import reason_of
from speculators_qwen_compat.data.normalize import media_forms
from speculators_qwen_compat.data.render import media
from speculators_qwen_compat.data.render import render as local_renderer

IMAGE_PAD = "<|image_pad|>"


@dataclass
class PadCheck:
    source: str
    server: int | None = None
    local: int | None = None
    suggestion: dict[str, Any] | None = None
    problem: str | None = None

    @property
    def agrees(self) -> bool:
        return self.problem is None and self.server == self.local


def render_url(endpoint: str) -> str:
    base = endpoint.rstrip("/").removesuffix("/v1")
    return base + "/v1/chat/completions/render"


def server_ids(endpoint: str, messages: list[dict[str, Any]], timeout: float = 120) -> list[int]:
    # no mm_processor_kwargs: the question is what the server counts with its own settings
    body = {"messages": messages, "add_generation_prompt": False}
    request = urllib.request.Request(
        render_url(endpoint), json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        return list(json.load(reply)["token_ids"])


def check(
    endpoint: str, source: str, conversation: list[dict[str, Any]], processor: Any
) -> PadCheck:
    """The server's and local rendering's pads for one image conversation (upstream's form)."""
    out = PadCheck(source)
    messages = media_forms.for_vllm(conversation)
    pad = processor.tokenizer.convert_tokens_to_ids(IMAGE_PAD)
    try:
        out.server = server_ids(endpoint, messages).count(pad)
    except urllib.error.HTTPError as exc:
        detail = " ".join(exc.read().decode(errors="replace").split())[:200]
        out.problem = f"the server does not render it (HTTP {exc.code}: {detail})"
        return out
    except (OSError, ValueError, KeyError) as exc:
        out.problem = f"the server does not render it ({reason_of(exc)})"
        return out
    try:
        ids = local_renderer.render_ids(processor, messages, add_generation_prompt=False)
    except Exception as exc:
        out.problem = f"local rendering fails: {reason_of(exc)}"
        return out
    out.local = ids.count(pad)
    if out.server != out.local:
        out.suggestion = _agreeing_kwargs(processor, messages, out.server)
    return out


def _agreeing_kwargs(
    processor: Any, messages: list[dict[str, Any]], target: int
) -> dict[str, Any] | None:
    """The smallest ``max_pixels`` whose local count of these images is ``target``, or None."""
    image_processor = processor.image_processor
    sizes = [media.image_size(media.local_path(url)) for url in media.image_urls(messages)]
    base = {k: v for k, v in media.processor_kwargs().items() if k not in ("max_pixels", "size")}

    def total(max_pixels: int) -> int:
        kwargs = {**base, "max_pixels": max_pixels}
        return sum(media.count_for_size(image_processor, h, w, kwargs) for h, w in sizes)

    low, high = 1, max(h * w for h, w in sizes) * 4
    if total(high) < target:
        return None
    while low < high:
        middle = (low + high) // 2
        if total(middle) >= target:
            high = middle
        else:
            low = middle + 1
    return {"max_pixels": low} if total(low) == target else None


def print_check(result: PadCheck, out: TextIO) -> None:
    head = f"  image pads ({result.source})"
    if result.problem:
        print(f"{head}: UNKNOWN: {result.problem}", file=out)
    elif result.agrees:
        print(f"{head}: match: {result.server} through the server and locally", file=out)
    else:
        fix = (
            f"pass prepare_data --mm-processor-kwargs '{json.dumps(result.suggestion)}'"
            " (the server's cap; check it against the --mm-processor-kwargs vLLM was started with)"
            if result.suggestion
            else "start vLLM with the same --mm-processor-kwargs prepare_data is given"
        )
        print(
            f"{head}: MISMATCH: the server gives {result.server}, local rendering "
            f"{result.local}: the server caps pixels per image; {fix}",
            file=out,
        )


def verdict(result: PadCheck) -> str | None:
    if result.problem or result.agrees:
        return None
    return (
        f"the server counts {result.server} image pads where local rendering counts "
        f"{result.local}: pass the server's --mm-processor-kwargs to prepare_data"
    )
