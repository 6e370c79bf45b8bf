"""Held-out conversations -> the chat requests acceptance sends.

Why: prompts are read as prepare_data reads them (data/read, data/normalize); a prompt is the
turns before the last assistant turn (prompt-only: all), with the row's tools and media, tool
calls in the shape vLLM validates (data/render ``request_messages``); bad rows are counted.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from speculators_qwen_compat.core.errors import CompatError, reason_of
from speculators_qwen_compat.data.normalize import media_forms
from speculators_qwen_compat.data.normalize.normalize import BadConversation, normalize_row
from speculators_qwen_compat.data.read import sources
from speculators_qwen_compat.data.read.files import RowStream
from speculators_qwen_compat.data.render.render import request_messages


@dataclass
class Prompt:
    """One request's messages and tools, and the row it came from (``file:line``)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    source: str


@dataclass
class Prompts:
    """The prompts read, and the rows skipped by reason."""

    prompts: list[Prompt] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)


def prompt_of(row: dict[str, Any], source: str) -> Prompt:
    """The request for one row (a parsed JSON object); BadConversation when it has none."""
    normalized = normalize_row(row)
    turns = media_forms.for_vllm(normalized.conversation)
    replies = [i for i, turn in enumerate(turns) if turn.get("role") == "assistant"]
    if replies:
        turns = turns[: replies[-1]]
    if not any(turn.get("role") == "user" for turn in turns):
        raise BadConversation("no user turn before the last assistant turn")
    return Prompt(request_messages(turns), normalized.tools, source)


def read_prompts(spec: str, rows: int) -> Prompts:
    """The first ``rows`` usable prompts of ``--data spec``."""
    found = sources.resolve(spec)  # a Hub repo folder: its train split; hf:DIR:test another
    if found is None:
        raise CompatError(
            f"--data {spec}: acceptance reads local .json/.jsonl/.parquet files and folders, "
            "save_to_disk folders and hf: data"
        )
    out = Prompts()
    stream = RowStream(found.sources, None)
    for raw in stream:
        try:
            row = json.loads(raw.text)
            if not isinstance(row, dict):
                raise BadConversation("not a JSON object")
            out.prompts.append(prompt_of(row, raw.source))
        except (BadConversation, json.JSONDecodeError) as exc:
            out.skipped[reason_of(exc, 80)] += 1
        if len(out.prompts) == rows:
            break
    if stream.pretokenized:
        raise CompatError(
            f"--data {spec}: rows of token ids (input_ids, loss_mask) hold no conversation to "
            "send; give the conversations they were made from"
        )
    if not out.prompts:
        reasons = "; ".join(f"{n} {reason}" for reason, n in out.skipped.most_common(3))
        raise CompatError(f"--data {spec}: no conversation to send ({reasons or 'no rows'})")
    return out
