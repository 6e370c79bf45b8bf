"""Let ``torch.compile`` wait for a first call while our commands import upstream.

Why: importing speculators runs ``torch.compile`` on module-level functions (0.5.0
``models/dflash/core.py:192``, 0.9.0 ``models/dflash/core.py:35``; ``conditional_torch_compile``
on CUDA machines), and building that wrapper imports torch's inductor compiler: measured here,
2-2.5 s of the ~9 s of CPU ``import speculators`` takes, in every prepare_data, status and doctor
run, none of which calls those functions. While ``compile_on_first_call()`` is open,
``torch.compile(function, **options)`` returns a function that calls the real ``torch.compile``
with the same options the first time it is called, then the compiled function (torch.compile
itself compiles on the first call too). Anything that is not a plain function (a module, a
method object) is compiled as asked. Used by this package's own commands only, never on the
``.pth`` path or in ``run``/``train``, whose process is the user's or upstream's program.
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
