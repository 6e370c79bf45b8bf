"""Fix: rows that keep ``messages`` get one Arrow type for it in every map worker.

Target: ``_preprocess_batch`` in releases whose multimodal rows keep ``messages`` (0.6+, the ones
with ``_adapt_conv_for_vllm``; docs/upstream.md "The messages column"). ``datasets.map`` infers
each worker's column types from that worker's rows, and ``messages`` holds whatever the
conversations hold: plain chats infer a struct, tool calls or image parts infer ``Json``. With
several workers over a corpus in blocks the shards disagree and the map dies at the end ("The
features can't be aligned because the key messages ..."). Each batch is handed back as an Arrow
table whose ``messages`` is ``List(Json())`` (each turn exactly as written, no keys added), the
type one worker's mixed rows already get. Shape needed: datasets' ``Json`` feature.
Retire when upstream passes ``features=`` to its map.
"""

from __future__ import annotations

from typing import Any

from speculators_qwen_compat.core.fix import Fix, Patcher, not_needed
from speculators_qwen_compat.core.targets import ANY, Found, Shape, Span, Target, present
from speculators_qwen_compat.core.upstream import PREPROCESSING
from speculators_qwen_compat.data.arrow_batch import MESSAGES, with_json_messages

BATCH = Target(PREPROCESSING, "_preprocess_batch", params=("examples",))
#: 0.6+: what upstream applies to the ``messages`` it keeps (<= 0.5 keep none).
ADAPT_FOR_VLLM = present(PREPROCESSING, "_adapt_conv_for_vllm")
#: datasets 5: the feature that holds any JSON value (imported by preprocessing before us).
JSON_FEATURE = Target("datasets", "Json", kind=ANY)


class MessagesJsonFix(Fix):
    name = "messages_json"
    summary = f"one Arrow type for the kept {MESSAGES} column in every map worker"
    modules = (PREPROCESSING,)
    shapes = (
        Shape(
            f"{MESSAGES} handed to datasets as List(Json)",
            (BATCH, JSON_FEATURE),
            when=(ADAPT_FOR_VLLM,),
        ),
    )
    otherwise = not_needed(f"rows keep no {MESSAGES} column (<= 0.5)")
    applies_on = Span("0.6.0.2", "0.9.0")

    def apply(self, found: Found, patcher: Patcher) -> None:
        def preprocess_batch(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            return with_json_messages(wrapped(*args, **kwargs))

        patcher.wrap(*found.place(BATCH), preprocess_batch)
