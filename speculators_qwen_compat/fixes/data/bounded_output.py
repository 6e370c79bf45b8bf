"""Fix: the tokenized rows of local JSON data go to Arrow files on disk, not into memory.

Why: every release maps with ``keep_in_memory=True``, so memory grows with the data
(docs/maintainers.md, "Speed"). For our reader's dataset (data/read/files.py) that map writes to the
run's own folder instead (``maps_to_disk``): the same rows, memory-mapped, no cache reused.
"""

from __future__ import annotations

from speculators_qwen_compat.core.fix import not_applicable
from speculators_qwen_compat.core.targets import ReleaseRange, Shape, Target, present
from speculators_qwen_compat.core.upstream import PREPROCESSING
from speculators_qwen_compat.route.declaration import RouteFix

#: The dataset builder: 0.8+ and <= 0.7 name it differently; both take the dataset first.
BUILDERS = tuple(
    Target(PREPROCESSING, name, params=("dataset",))
    for name in ("build_speculator_training_dataset", "build_eagle3_dataset")
)
#: datasets' own ``Dataset.map``, which the builder calls with ``keep_in_memory=True``.
DATASET_MAP = Target("datasets", "Dataset.map")


class BoundedOutputFix(RouteFix):
    name = "bounded_output"
    summary = "write the tokenized rows of local JSON data to disk instead of holding them"
    modules = (PREPROCESSING,)
    shapes = tuple(
        Shape(
            f"{builder.path} maps our memory-mapped rows to disk",
            (builder, DATASET_MAP),
            when=(present(PREPROCESSING, builder.path),),
        )
        for builder in BUILDERS
    )
    otherwise = not_applicable("preprocessing has no dataset builder")
    applies_on = ReleaseRange("0.5.0", "0.9.0")
