"""Let ``torch.compile`` wait for a first call while our commands import upstream.

Why: speculators compiles functions at import (docs/upstream.md, "Importing speculators"), and
building that wrapper imports torch's inductor: seconds of CPU in every prepare_data, status and
doctor run, none of which calls them. Our own commands only, never ``run`` or ``train``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def compile_on_first_call() -> Iterator[None]:
    try:
        import torch
    except ImportError:  # no torch: upstream's import will say so itself
        yield
        return
    eager = torch.compile

    def deferred(model: Any = None, **options: Any) -> Any:
        if model is None:  # used as @torch.compile(**options)
            return lambda target: deferred(target, **options)
        if not inspect.isfunction(model):
            return eager(model, **options)
        return _compiled_when_called(eager, model, options)

    torch.compile = deferred
    try:
        yield
    finally:
        if torch.compile is deferred:
            torch.compile = eager


def _compiled_when_called(
    eager: Callable[..., Any], function: Callable[..., Any], options: dict[str, Any]
) -> Callable[..., Any]:
    compiled: Callable[..., Any] | None = None

    @functools.wraps(function)
    def first_call_compiles(*args: Any, **kwargs: Any) -> Any:
        nonlocal compiled
        if compiled is None:
            compiled = eager(function, **options)
        return compiled(*args, **kwargs)

    return first_call_compiles
