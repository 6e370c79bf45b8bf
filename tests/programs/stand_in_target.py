"""A stand-in for an upstream module that fixes target (cannot_apply.py): one function, and a
module ``__getattr__`` that raises, as a broken module would, for any other name."""

from __future__ import annotations


def f() -> str:
    return "original"


def __getattr__(name: str) -> object:
    raise RuntimeError("no such thing")
