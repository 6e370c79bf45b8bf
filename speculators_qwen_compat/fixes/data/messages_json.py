"""Fix: rows that keep ``messages`` get one Arrow type for it in every map worker.

Target: ``_preprocess_batch`` where multimodal rows keep ``messages`` (0.6+): each batch
goes back as an Arrow table with ``messages`` as ``List(Json())`` (data/render/arrow_batch.py),
so the shards join (docs/upstream.md, "The messages column"). Retire: upstream passes features.
"""

from __future__ import annotations

from speculators_qwen_compat.core.fix import not_needed
from speculators_qwen_compat.core.targets import ANY, ReleaseRange, Shape, Target, present
from speculators_qwen_compat.core.upstream import PREPROCESSING
from speculators_qwen_compat.data.render.arrow_batch import MESSAGES
from speculators_qwen_compat.route.declaration import RouteFix

BATCH = Target(PREPROCESSING, "_preprocess_batch", params=("examples",))
#: 0.6+: what upstream applies to the ``messages`` it keeps (<= 0.5 keep none).
ADAPT_FOR_VLLM = present(PREPROCESSING, "_adapt_conv_for_vllm")
#: datasets 5: the feature that holds any JSON value (imported by preprocessing before us).
JSON_FEATURE = Target("datasets", "Json", kind=ANY)


class MessagesJsonFix(RouteFix):
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
    applies_on = ReleaseRange("0.6.0.2", "0.9.0")
