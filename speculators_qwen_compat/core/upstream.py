"""Names of the upstream modules the fixes target, and helpers to read their shape and calls.

Why: upstream calls its own functions by position (docs/upstream.md, "Row errors"), so a wrapper
must not read an argument by a hard-coded index. ``bind`` maps a call onto the target's own
signature; each shape check requires by name the parameters it reads (``missing``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

PREPROCESSING = "speculators.data_generation.preprocessing"
#: 0.8+: the HTTP client preprocessing renders through (``render_conversation``, ``_post``).
RENDER_CLIENT = "speculators.data_generation.render_client"
CLI_PREPARE_DATA = "speculators.cli.prepare_data"
#: 0.8+: ``speculators regenerate-responses`` (on-policy replies through a vLLM server).
CLI_REGENERATE = "speculators.cli.regenerate_responses"
SPECULATOR_MODEL = "speculators.model"
TRAIN_UTILS = "speculators.train.utils"
TRAINER = "speculators.train.trainer"
#: 0.8+: ``python -m speculators.train`` builds the drafter here (``build_draft_model``).
TRAIN_CLI = "speculators.train.cli"
TRAIN_RECOVERY = "speculators.train.recovery"
TRAIN_DATA = "speculators.train.data"


@functools.lru_cache(maxsize=256)
def _signature(func: Callable[..., Any]) -> inspect.Signature:
    return inspect.signature(func)


def parameters(func: Callable[..., Any]) -> list[str]:
    """Parameter names of an upstream function (through any wrapt wrapper)."""
    return list(_signature(func).parameters)


def missing(func: Callable[..., Any], *names: str) -> list[str]:
    """Which of ``names`` the function does not take (for a shape check)."""
    taken = set(parameters(func))
    return [name for name in names if name not in taken]


def bind(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """An intercepted call's arguments bound to ``func``'s own signature, defaults filled in:
    ``bound.arguments[name]`` reads one, ``call(func, bound)`` calls with edited ones."""
    bound = _signature(func).bind(*args, **kwargs)
    bound.apply_defaults()
    return bound


@functools.lru_cache(maxsize=256)
def _plain_parameters(
    func: Callable[..., Any],
) -> tuple[tuple[str, ...], tuple[str, ...], frozenset[str], dict[str, Any]] | None:
    """(the names a call may give by position, every name in order, the same as a set, the
    defaults) of a signature without ``*args``, ``**kwargs`` or positional-only parameters;
    None for any other: ``arguments`` then binds through ``inspect``."""
    parameters = _signature(func).parameters.values()
    keyword = inspect.Parameter.KEYWORD_ONLY
    if any(p.kind not in (inspect.Parameter.POSITIONAL_OR_KEYWORD, keyword) for p in parameters):
        return None
    names = tuple(p.name for p in parameters)
    positional = tuple(p.name for p in parameters if p.kind is not keyword)
    defaults = {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}
    return positional, names, frozenset(names), defaults


def arguments(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict:
    """``bind(func, args, kwargs).arguments`` (defaults filled in) as a dict, without
    ``inspect``'s binding on the way of a per-row or per-request call when every parameter is
    given once or defaulted; any other call binds through ``bind`` (its TypeError included)."""
    plain = _plain_parameters(func)
    if plain is not None:
        positional, names, known, defaults = plain
        if len(args) <= len(positional) and not kwargs.keys() & positional[: len(args)]:
            given = {**dict(zip(positional, args, strict=False)), **kwargs}
            if given.keys() <= known and known <= given.keys() | defaults.keys():
                return {name: given[name] if name in given else defaults[name] for name in names}
    return dict(bind(func, args, kwargs).arguments)


def call(func: Callable[..., Any], bound: Any) -> Any:
    return func(*bound.args, **bound.kwargs)


def batch_length(examples: dict[str, list[Any]]) -> int:
    return max((len(column) for column in examples.values()), default=0)


def is_pretokenized(examples: dict[str, Any]) -> bool:
    return "input_ids" in examples and "loss_mask" in examples
