"""Names of the upstream modules the fixes target, and small helpers to read their shape."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

PREPROCESSING = "speculators.data_generation.preprocessing"
CLI_PREPARE_DATA = "speculators.cli.prepare_data"
SPECULATOR_MODEL = "speculators.model"
TRAIN_UTILS = "speculators.train.utils"


def parameters(func: Callable[..., Any]) -> list[str]:
    """Parameter names of an upstream function (through any wrapt wrapper)."""
    return list(inspect.signature(func).parameters)


def argument(name: str, position: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """An argument of an intercepted call, passed by position or by name."""
    if name in kwargs:
        return kwargs[name]
    return args[position] if len(args) > position else None


def batch_length(examples: dict[str, list[Any]]) -> int:
    return max((len(column) for column in examples.values()), default=0)


def is_pretokenized(examples: dict[str, Any]) -> bool:
    return "input_ids" in examples and "loss_mask" in examples
