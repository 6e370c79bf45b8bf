"""The tokenizer upstream's map lambda holds, crossing to fork-started map workers by reference.

Each job pickled the whole tokenizer and each worker rebuilt it (docs/upstream.md, "Map workers");
while ``inherited_by_forked_workers`` runs it crosses as a key into ``_INHERITED``, which the
forked workers inherited; another start method pickles it as before."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: id -> the object forked workers inherited (filled only while upstream's function runs)
_INHERITED: dict[int, Any] = {}


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
