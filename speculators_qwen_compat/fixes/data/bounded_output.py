"""Fix: the tokenized rows of local JSON data go to Arrow files on disk, not into memory.

Why: every release maps with ``keep_in_memory=True``, so memory grows with the data
(docs/maintainers.md, "Speed"). For our reader's dataset (data/read/files.py) that map writes to the
run's own folder instead: the same rows, memory-mapped, no earlier run's cache reused.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from speculators_qwen_compat.core.fix import Fix, Patcher, not_applicable
from speculators_qwen_compat.core.targets import Found, ReleaseRange, Shape, Target, present
from speculators_qwen_compat.core.upstream import PREPROCESSING, bind
from speculators_qwen_compat.data.read.files import CACHE_FOLDER
from speculators_qwen_compat.fixes import route

#: The dataset builder: 0.8+ and <= 0.7 name it differently; both take the dataset first.
BUILDERS = tuple(
    Target(PREPROCESSING, name, params=("dataset",))
    for name in ("build_speculator_training_dataset", "build_eagle3_dataset")
)
#: datasets' own ``Dataset.map``, which the builder calls with ``keep_in_memory=True``.
DATASET_MAP = Target("datasets", "Dataset.map")

#: The id of the dataset whose next ``map`` call goes to disk: set by the builder's wrapper for
#: the call it wraps (it travels with that call and is put back when it returns), cleared by
#: that one map.
_on_disk: ContextVar[int | None] = ContextVar("speculators_qwen_compat_on_disk", default=None)


class BoundedOutputFix(Fix):
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

    def apply(self, found: Found, patcher: Patcher) -> None:
        builder = found.shape.targets[0]

        def build(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            dataset = bind(wrapped, args, kwargs).arguments["dataset"]
            if not _from_our_reader(dataset):
                return wrapped(*args, **kwargs)
            token = _on_disk.set(id(dataset))
            try:
                return wrapped(*args, **kwargs)
            finally:
                _on_disk.reset(token)

        def dataset_map(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            if _on_disk.get() == id(instance) and kwargs.get("keep_in_memory"):
                _on_disk.set(None)  # only upstream's one map over the rows
                kwargs = {**kwargs, "keep_in_memory": False}
            return wrapped(*args, **kwargs)

        route.wrap(found, patcher, builder, self.name, build)
        patcher.wrap(*found.owner_and_name(DATASET_MAP), dataset_map)


def _from_our_reader(dataset: Any) -> bool:
    files = getattr(dataset, "cache_files", None) or []
    return bool(files) and all(CACHE_FOLDER in str(f.get("filename", "")) for f in files)
