"""What a fix is: its states, its shape-check verdict (``Fits``), the journal that records every
attribute it replaces (``Patcher``), and the ``Fix`` base class every module under ``fixes/``
subclasses. The registry (registry.py) imports this module; this module imports nothing of ours,
so fixes and registry never import each other in a circle."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

APPLIED = "applied"
NOT_NEEDED = "not-needed"
NOT_APPLICABLE = "not-applicable"
DISABLED = "disabled"
FAILED = "failed"
PENDING = "pending"  # installed, target module not imported yet


class Fits:
    """What a fix's shape check says about the installed release."""

    def __init__(self, state: str, reason: str) -> None:
        self.state = state
        self.reason = reason


def applies(reason: str) -> Fits:
    return Fits(APPLIED, reason)


def not_needed(reason: str) -> Fits:
    return Fits(NOT_NEEDED, reason)


def not_applicable(reason: str) -> Fits:
    return Fits(NOT_APPLICABLE, reason)


class Patcher:
    """Records every attribute a fix replaces so that uninstall() can put it back."""

    def __init__(self) -> None:
        # (owner, name, original, owned): ``owned`` is False when the owner only inherited the
        # attribute (a method of a base class): restore() then deletes ours instead of pinning
        # the inherited value on the subclass.
        self._saved: list[tuple[Any, str, Any, bool]] = []

    def wrap(self, owner: Any, name: str, wrapper: Callable[..., Any]) -> None:
        """Replace ``owner.name`` by a wrapt FunctionWrapper calling ``wrapper(wrapped, instance,
        args, kwargs)``; signature and ``__wrapped__`` stay those of the original."""
        import wrapt

        original = getattr(owner, name)
        self.replace(owner, name, wrapt.FunctionWrapper(original, wrapper))

    def replace(self, owner: Any, name: str, value: Any) -> None:
        owned = not isinstance(owner, type) or name in vars(owner)
        self._saved.append((owner, name, getattr(owner, name), owned))
        setattr(owner, name, value)

    def adopt(self, owner: Any, name: str, original: Any) -> None:
        """Record that ``owner.name`` already holds one of our wrappers (bound by a
        ``from ... import`` after we wrapped its source) so that restore() puts ``original``
        back there too."""
        self._saved.append((owner, name, original, True))

    def original_of(self, owner: Any, name: str) -> Any:
        """What ``owner.name`` held before the first replacement recorded for it."""
        for saved_owner, saved_name, original, _ in self._saved:
            if saved_owner is owner and saved_name == name:
                return original
        raise KeyError(f"{name} was not replaced")

    def mark(self) -> int:
        return len(self._saved)

    def restore(self, mark: int = 0) -> None:
        """Undo every replacement made since ``mark``, newest first."""
        while len(self._saved) > mark:
            owner, name, original, owned = self._saved.pop()
            if owned:
                setattr(owner, name, original)
            else:
                delattr(owner, name)


class Fix:
    """One fix: the modules it targets, a shape check, and how it patches them."""

    name: str = ""
    summary: str = ""
    #: Modules whose import applies this fix; the first is the one whose shape decides.
    modules: tuple[str, ...] = ()

    def fits(self, module_name: str, module: ModuleType) -> Fits:
        raise NotImplementedError

    def apply(self, module_name: str, module: ModuleType, patcher: Patcher) -> None:
        raise NotImplementedError


@dataclass
class FixStatus:
    name: str
    state: str
    reason: str
