"""A library's fatal error in a prepare_data run: the stage it stopped in, and the next step.

Why: an error from transformers, datasets, Arrow or upstream is not ours to reword, but its message
alone does not tell a user what to do. The stage is read from the traceback; known causes (a full
disk, missing processor files, memory) say exactly what to do, anything else how to report it.
"""

from __future__ import annotations

import errno
import traceback
from dataclasses import dataclass


@dataclass(frozen=True)
class Stage:
    """A step of a run, recognised by the functions on the stack while it runs."""

    name: str
    functions: frozenset[str]  # "module-prefix:function"
    next_step: str


_REPORT = (
    "rerun with --debug and send the traceback and `speculators-qwen-compat status` "
    "to the maintainers"
)
LOADING = Stage(
    "loading the model's tokenizer and processor (--model)",
    frozenset({"transformers:from_pretrained", "speculators:load_processor"}),
    "check that --model is a checkpoint folder (config.json, the tokenizer files and, for "
    "Qwen3.6, its processor files) or a model in the local Hugging Face cache",
)
READING = Stage(
    "reading --data",
    frozenset({"speculators:load_raw_dataset", "datasets:load_dataset"}),
    "check the --data files (`speculators-qwen-compat doctor --model M --data FILE` names the "
    "bad rows)",
)
MAPPING = Stage(
    "tokenizing and masking the rows (datasets.map)",
    frozenset({"datasets:map", "speculators:load_and_preprocess_dataset"}),
    _REPORT,
)
SAVING = Stage(
    "saving the prepared rows",
    frozenset({"datasets:save_to_disk", "speculators:save_token_frequency_distribution"}),
    "check that the disk holding --output has room and is writable, then rerun",
)
#: Innermost first: a save inside the run is the save, not the run.
STAGES = (LOADING, READING, SAVING, MAPPING)
RUN = Stage("preparing the data", frozenset(), _REPORT)


def stage_of(exc: BaseException) -> Stage:
    """The innermost known stage on ``exc``'s traceback (``RUN`` when none is)."""
    frames = [(frame.f_globals.get("__name__", ""), frame.f_code.co_name)
              for frame, _ in traceback.walk_tb(exc.__traceback__)]  # fmt: skip
    for module, function in reversed(frames):
        for stage in STAGES:
            if any(
                function == name and module.startswith(prefix)
                for prefix, name in (entry.split(":") for entry in stage.functions)
            ):
                return stage
    return RUN


def next_step(exc: BaseException, stage: Stage) -> str:
    """What to do: the cause's own remedy where it is known, else the stage's."""
    text = str(exc)
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        where = f" ({exc.filename})" if exc.filename else ""
        return (
            f"the disk is full{where}: free space there, or point --output, TMPDIR and "
            "HF_DATASETS_CACHE (the rows' scratch copy) at a disk with room, and rerun "
            "(nothing was written to --output)"
        )
    if isinstance(exc, MemoryError):
        return "out of memory: rerun with fewer --num-preprocessing-workers"
    if stage is MAPPING and isinstance(exc, TimeoutError):  # datasets' pool lost a worker
        return (
            "a map worker died (often the kernel's out-of-memory killer: see `dmesg`): rerun "
            "with fewer --num-preprocessing-workers"
        )
    if stage is LOADING and _about_the_processor(text) and _missing_vision_packages():
        return (
            "this speculators release loads the target's processor for a vision-language "
            "config (Qwen3.5/3.6), which needs Pillow and torchvision: pip install pillow "
            "torchvision (the torchvision build that matches your torch)"
        )
    if stage is LOADING and "preprocessor_config.json" in text:
        return (
            "this speculators release loads the target's processor for a vision-language "
            "config (Qwen3.5/3.6): copy the checkpoint's preprocessor_config.json and "
            "video_preprocessor_config.json into the --model folder"
        )
    if stage is MAPPING and "can't be aligned" in text:
        return f"rerun with --num-preprocessing-workers 1, and {_REPORT}"
    return stage.next_step


def _about_the_processor(text: str) -> bool:
    words = ("torchvision", "Pillow", "image processor", "preprocessor_config.json")
    return any(word in text for word in words)


def _missing_vision_packages() -> bool:
    """transformers' error names torchvision on some paths only (an image processor class it
    cannot build is "Unrecognized" on others): ask the venv itself."""
    from importlib.util import find_spec

    return find_spec("torchvision") is None or find_spec("PIL") is None


def explain(exc: BaseException, message: str) -> str:
    """``message`` (the library's ``Type: words``) with the stage before it and the next step
    after it, one line."""
    stage = stage_of(exc)
    return f"{stage.name}: {message}; {next_step(exc, stage)}"
