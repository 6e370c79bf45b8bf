"""Fix: conversations in either format reach the template, normalised; unreadable rows are counted.

Why: upstream reads local JSON through Arrow's schema inference and only ``conversations``
(docs/upstream.md, "Conversation column and normalization"). Targets: ``load_raw_dataset`` (our
reader), ``_preprocess_batch``, ``_normalize_conversation``, ``concatenate_datasets`` (route/).
"""

from __future__ import annotations

from speculators_qwen_compat.core.targets import ReleaseRange, Shape, Target
from speculators_qwen_compat.core.upstream import PREPROCESSING
from speculators_qwen_compat.route.declaration import RouteFix

LOADER = Target(PREPROCESSING, "load_raw_dataset", params=("train_data_path", "num_proc"))
PATH_ONLY_LOADER = Target(PREPROCESSING, "load_raw_dataset", params=("train_data_path",), arity=1)
BATCH = Target(PREPROCESSING, "_preprocess_batch", params=("examples",))
NORMALIZE = Target(PREPROCESSING, "_normalize_conversation", params=("conv",))
#: datasets' function as bound in preprocessing: joins the datasets of several ``--data``.
CONCATENATE = Target(PREPROCESSING, "concatenate_datasets", params=("dsets",), optional=True)
#: <= 0.5: load_raw_dataset(path, num_proc) returns the dataset; 0.6+: load_raw_dataset(path)
#: returns (dataset, normalize_fn).
RETURNS_DATASET = Shape(
    "load_raw_dataset(path, num_proc), _preprocess_batch and _normalize_conversation wrapped",
    (LOADER, BATCH, NORMALIZE, CONCATENATE),
    when=(LOADER,),
)
RETURNS_PAIR = Shape(
    "load_raw_dataset(path), _preprocess_batch and _normalize_conversation wrapped",
    (PATH_ONLY_LOADER, BATCH, NORMALIZE, CONCATENATE),
)


class ConversationsFix(RouteFix):
    name = "conversations"
    summary = "read ShareGPT and OpenAI rows (and mixes), normalise roles, parts, reasoning, tools"
    modules = (PREPROCESSING,)
    shapes = (RETURNS_DATASET, RETURNS_PAIR)
    applies_on = ReleaseRange("0.5.0", "0.9.0")
