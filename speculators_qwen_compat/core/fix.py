"""What a fix is: its state (``FixState``), its shape-check verdict (``Verdict``), the journal
of every attribute it replaces (``Patcher``) and the ``Fix`` base class each module under
``fixes/`` subclasses (targets, shapes, releases; then ``apply``). Imports nothing of ours at
run time, so nothing imports in a circle."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from speculators_qwen_compat.core.targets import Found, ReleaseRange, Shape


class FixState(StrEnum):
    """Where a fix stands in this interpreter; the values are what ``status`` prints and the
    run report records."""

    APPLIED = "applied"
    NOT_NEEDED = "not-needed"  # this release lacks the problem
    NOT_APPLICABLE = "not-applicable"  # upstream's shape is one the fix does not know
    DISABLED = "disabled"  # switched off by the user
    FAILED = "failed"  # the shape check or the patch raised: upstream runs unpatched
    PENDING = "pending"  # installed, target module not imported yet
    INACTIVE = "inactive"  # install() not called


@dataclass(frozen=True)
class Verdict:
    """What a fix's shape check says about the installed release, and why."""

    state: FixState
    reason: str


def applies(reason: str) -> Verdict:
    return Verdict(FixState.APPLIED, reason)


def not_needed(reason: str) -> Verdict:
    return Verdict(FixState.NOT_NEEDED, reason)


def not_applicable(reason: str) -> Verdict:
    return Verdict(FixState.NOT_APPLICABLE, reason)


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
    """One fix, declared: the modules whose import applies it (the first decides its state), the
    shapes of upstream it knows, what it is where none fits, and the tested releases it applies
    on. ``apply`` patches what the shape check resolved (``Found``) through the journal."""

    name: str = ""
    summary: str = ""
    modules: tuple[str, ...] = ()
    shapes: tuple[Shape, ...] = ()
    #: The verdict when no shape's ``when`` fits (say, not-needed: the release lacks the problem).
    otherwise: Verdict = Verdict(FixState.NOT_APPLICABLE, "no known shape")
    applies_on: ReleaseRange | None = None

    def apply(self, found: Found, patcher: Patcher) -> None:
        raise NotImplementedError


@dataclass
class FixStatus:
    name: str
    state: FixState
    reason: str
    #: The tested releases the fix applies on (``Fix.applies_on``), e.g. "0.5.0-0.7.0.2".
    tested: str = ""
