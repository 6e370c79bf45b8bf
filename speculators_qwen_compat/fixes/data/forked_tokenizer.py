"""Fix (speed): forked map workers use the tokenizer they inherited instead of a pickled copy.

Target: ``build_eagle3_dataset`` (<= 0.7), whose map lambda holds the tokenizer: every job pickles
it, every worker rebuilds it (docs/upstream.md, "Map workers"). Meanwhile it crosses to forked
workers as a key into this module's table (``ForkingPickler``); anything else pickles as before.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from speculators_qwen_compat.core.fix import Fix, Patcher, not_needed
from speculators_qwen_compat.core.targets import Found, ReleaseRange, Shape, Target, present
from speculators_qwen_compat.core.upstream import PREPROCESSING, bind
from speculators_qwen_compat.fixes import route

BUILD = Target(
    PREPROCESSING, "build_eagle3_dataset", params=("dataset", "tokenizer|processor", "num_proc")
)

#: id -> the object forked workers inherited (filled only while upstream's function runs)
_INHERITED: dict[int, Any] = {}


class ForkedTokenizerFix(Fix):
    name = "forked_tokenizer"
    summary = "map workers use the tokenizer they were forked with, not a pickled copy per job"
    modules = (PREPROCESSING,)
    shapes = (
        Shape(
            "the map's tokenizer crosses to forked workers by reference",
            (BUILD,),
            when=(present(PREPROCESSING, BUILD.path),),
        ),
    )
    otherwise = not_needed("the map function holds a render endpoint, not a tokenizer")
    applies_on = ReleaseRange("0.5.0", "0.7.0.2")

    def apply(self, found: Found, patcher: Patcher) -> None:
        def build(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            arguments = bind(wrapped, args, kwargs).arguments
            tokenizer = arguments.get("tokenizer", arguments.get("processor"))
            if (arguments["num_proc"] or 1) <= 1 or tokenizer is None:
                return wrapped(*args, **kwargs)
            with inherited_by_forked_workers(tokenizer):
                return wrapped(*args, **kwargs)

        route.wrap(found, patcher, BUILD, self.name, build)


@contextmanager
def inherited_by_forked_workers(shared: Any) -> Iterator[None]:
    """While inside, ``shared`` crosses to worker processes started by fork as a reference to
    their own inherited copy (the pool is forked inside, after it is registered here)."""
    from multiprocess.reduction import ForkingPickler

    kind = type(shared)
    reducers = getattr(ForkingPickler, "_extra_reducers", None)  # what register() fills
    if not isinstance(reducers, dict) or kind in reducers:
        yield  # another multiprocess, or someone else decides how this type crosses
        return
    _INHERITED[id(shared)] = shared
    ForkingPickler.register(kind, _crossing)
    try:
        yield
    finally:
        reducers.pop(kind, None)
        _INHERITED.pop(id(shared), None)


def _crossing(obj: Any) -> tuple[Any, ...]:
    """How ``obj`` is pickled for a worker: by key when the worker was forked holding it."""
    if _INHERITED.get(id(obj)) is obj and _forking():
        return _inherited, (id(obj),)
    return obj.__reduce_ex__(pickle.DEFAULT_PROTOCOL)


def _forking() -> bool:
    import multiprocess

    # The pool exists by the time a job is pickled, so this reads the start method it used.
    return multiprocess.get_start_method() == "fork"


def _inherited(key: int) -> Any:
    """In a forked worker: the object the parent registered before forking it."""
    try:
        return _INHERITED[key]
    except KeyError:
        raise RuntimeError(
            "speculators_qwen_compat: a map worker was not forked from the process that "
            "registered its tokenizer; set SPECULATORS_QWEN_COMPAT=off:forked_tokenizer"
        ) from None
