"""``doctor``'s report on image and video conversations.

Compares the pads per image the target's processor gives (what vLLM gives) with the pads in the
rows the run writes (docs/upstream.md, "Images on the processor path"), and warns about a missing
Pillow or torchvision, a processor that does not load, and missing or unreadable files.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from speculators_qwen_compat.core.errors import reason_of
from speculators_qwen_compat.data.normalize import processor_media
from speculators_qwen_compat.data.normalize.batch import SCRIPT
from speculators_qwen_compat.data.render import render as local_renderer

#: Media conversations shown one by one.
SHOWN = 3


@dataclass
class MediaRow:
    source: str
    images: int
    per_image: list[int] | None = None  # the processor's pads for each image
    written: int | None = None  # pads in the row(s) the run writes; None: skipped or failed
    problem: str | None = None


@dataclass
class MediaReport:
    conversations: int = 0
    images: int = 0
    videos: int = 0
    how: str = ""
    rows: list[MediaRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class ReleaseProcessor:
    """What the installed release loads for the target, loaded once and only when asked:
    ``load_processor`` (0.6+: AutoProcessor) or a tokenizer (0.5)."""

    def __init__(self, preprocessing: ModuleType, model: str) -> None:
        self._preprocessing = preprocessing
        self._model = model
        self._loaded: tuple[Any, str | None] | None = None

    def get(self) -> tuple[Any, str | None]:
        """(the processor, or None when it does not load; why it does not)."""
        if self._loaded is None:
            load = getattr(self._preprocessing, "load_processor", None)
            if not callable(load):
                self._loaded = (None, None)  # <= 0.5: a tokenizer, never a processor
            else:
                try:
                    self._loaded = (load(self._model), None)
                except Exception as exc:
                    self._loaded = (None, reason_of(exc))
        return self._loaded

    def multimodal(self) -> bool:
        return processor_media.is_multimodal(self.get()[0])


def count(report: MediaReport, conversation: list[dict[str, Any]]) -> bool:
    """Add the conversation's media to the counts; True when it has any."""
    kinds = [processor_media.kind_of(part) for part in processor_media.media_parts(conversation)]
    if not kinds:
        return False
    report.conversations += 1
    report.images += kinds.count("image")
    report.videos += kinds.count("video")
    return True


def build(
    report: MediaReport,
    samples: list[tuple[str, list[dict[str, Any]]]],
    loaded: ReleaseProcessor,
    preprocessing: ModuleType,
    generation: str,
) -> MediaReport:
    """Fill in how the run tokenizes the media conversations ``samples`` (the first few)."""
    processor, load_error = loaded.get()
    missing = [name for name in ("PIL", "torchvision") if importlib.util.find_spec(name) is None]
    if missing:
        names = " and ".join("Pillow" if n == "PIL" else n for n in missing)
        report.warnings.append(
            f"{names} not installed: the target's processor cannot read images here"
        )
    if load_error:
        report.how = f"the target's processor does not load ({load_error})"
        report.warnings.append(
            "prepare_data loads the target's processor first and stops there: "
            "install torchvision and Pillow (the processor path)"
        )
        return report
    if not processor_media.is_multimodal(processor):
        # <= 0.7: data/normalize/processor_media.py skips them; 0.8+: local rendering refuses
        # images for a target without an image processor, as vLLM does (data/render/media.py)
        report.how = "the run loads a tokenizer: image/video conversations are skipped"
        why = "the target has no image processor"
        if generation == SCRIPT:
            why = processor_media.NEEDS_PROCESSOR
        found = f"{report.conversations} conversations with images or videos"
        report.warnings.append(f"{found} would be skipped: {why}")
        return report
    name = type(processor).__name__
    report.how = (
        f"the template is applied with the target's processor ({name}), as upstream does"
        if generation == SCRIPT
        else f"rendered in-process (--render-endpoint local) with the target's processor ({name})"
    )
    for source, conversation in samples:
        report.rows.append(_row(source, conversation, processor, preprocessing, generation))
    for row in report.rows:
        if row.problem:
            report.warnings.append(f"{row.source}: {row.problem}")
        elif row.per_image is not None and row.written != sum(row.per_image):
            report.warnings.append(
                f"{row.source}: the row holds {row.written} image pads where the processor "
                f"(and vLLM) give {sum(row.per_image)}: generate-offline-data "
                "--validate-outputs rejects such rows; pass --render-endpoint URL to prepare_data"
            )
    return report


def _row(
    source: str,
    conversation: list[dict[str, Any]],
    processor: Any,
    preprocessing: ModuleType,
    generation: str,
) -> MediaRow:
    parts = processor_media.media_parts(conversation)
    images = sum(processor_media.kind_of(p) == "image" for p in parts)
    row = MediaRow(source, images)
    try:
        readable = processor_media.for_processor(conversation, True)
        encoded = processor.apply_chat_template(
            _as_parts(readable), tokenize=True, return_dict=True
        )
    except Exception as exc:
        row.problem = reason_of(exc)
        return row
    merge = int(getattr(processor.image_processor, "merge_size", 2))
    grid = encoded.get("image_grid_thw")
    row.per_image = [int(g.prod()) // merge**2 for g in grid] if grid is not None else []
    pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    if generation == SCRIPT:  # upstream's own call: the processor's ids are the row
        row.written = list(encoded["input_ids"][0]).count(pad)
        return row
    adapt = getattr(preprocessing, "_adapt_conv_for_vllm", None)
    try:  # upstream's own adapter first (it refuses some parts), then our rendering
        messages = adapt(conversation) if callable(adapt) else conversation
        ids = local_renderer.render_ids(processor, messages, add_generation_prompt=False)
    except Exception as exc:
        row.problem = f"local rendering fails: {reason_of(exc)}"
        return row
    row.written = ids.count(pad)
    return row


def _as_parts(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every turn's content as a list of parts, as a processor's template wants it."""
    out = []
    for turn in conversation:
        content = turn.get("content")
        if isinstance(content, str):
            turn = {**turn, "content": [{"type": "text", "text": content}]}
        out.append(turn)
    return out


def lines(report: MediaReport) -> list[str]:
    """The report as doctor prints it (nothing when no conversation has media)."""
    if not report.conversations:
        return []
    out = [
        f"media: {report.conversations} conversations with images or videos "
        f"({report.images} images, {report.videos} videos)",
        f"  {report.how}",
    ]
    for row in report.rows:
        if row.per_image is None or row.problem:  # a problem is listed among the warnings
            continue
        per = ", ".join(map(str, row.per_image)) or "-"
        out.append(
            f"  {row.source}: {row.images} images; tokens per image (processor): {per}; "
            f"in the row: {row.written}"
        )
    out.append(f"  media warnings: {len(report.warnings) or 'none'}")
    out.extend(f"    {text}" for text in report.warnings)
    return out
