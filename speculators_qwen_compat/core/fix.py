"""What a fix is: its state (``FixState``), its shape-check verdict (``Verdict``), the journal
of every attribute it replaces (``Patcher``) and the ``Fix`` base class each module under
``fixes/`` subclasses (targets, shapes, releases; then ``apply``). Imports nothing of ours at
run time, so nothing imports in a circle."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from speculators_qwen_compat.core.targets import ReleaseRange, Resolved, Shape


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
        # a class's own entry as it is (a classmethod's descriptor, not the method it binds)
        original = vars(owner)[name] if isinstance(owner, type) and owned else getattr(owner, name)
        self._saved.append((owner, name, original, owned))
        setattr(owner, name, value)

    def wrap_stage(
        self, owner: Any, name: str, order: Sequence[str], stage: str, wrapper: Callable[..., Any]
    ) -> None:
        """Add ``wrapper`` as ``stage`` of the one wrapper fixes sharing ``owner.name`` put
        there (``Route``): stages run outer to inner in ``order``; undone like a replacement."""
        current = getattr(owner, name)
        route = getattr(current, "_self_wrapper", None)
        if not (isinstance(route, Route) and route.order == tuple(order)):
            route = Route(order)
            self.wrap(owner, name, route)
        self.replace(route.stages, stage, wrapper)

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


class Route:
    """The one wrapper on an upstream function several fixes wrap: each fix sets its stage (a
    wrapt-style ``wrapper(wrapped, instance, args, kwargs)``), and a call runs the stages set,
    outer to inner in ``order``, then upstream's function. A fix switched off sets none."""

    def __init__(self, order: Sequence[str]) -> None:
        self.order = tuple(order)
        self.stages = SimpleNamespace(**dict.fromkeys(self.order))
        self._chains: dict[tuple[Any, ...], Callable[..., Any]] = {}

    def __call__(self, wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        set_stages = tuple(getattr(self.stages, name) for name in self.order)
        if instance is None:  # a module's function: the chain is built once per set of stages
            key = (wrapped, *set_stages)
            chain = self._chains.get(key)
            if chain is None:
                self._chains.clear()  # the stages changed: older chains are not called again
                chain = self._chains[key] = _chain(wrapped, instance, set_stages)
        else:
            chain = _chain(wrapped, instance, set_stages)
        return chain(*args, **kwargs)


def _chain(wrapped: Any, instance: Any, stages: tuple[Any, ...]) -> Callable[..., Any]:
    chain = wrapped
    for stage in reversed(stages):
        if stage is not None:
            chain = _link(chain, stage, instance)
    return chain


def _link(inner: Any, stage: Callable[..., Any], instance: Any) -> Callable[..., Any]:
    def link(*args: Any, **kwargs: Any) -> Any:
        return stage(inner, instance, args, kwargs)

    # a stage binds arguments to upstream's own signature: inspect follows __wrapped__
    return functools.update_wrapper(link, inner)


class NothingToPatch(Exception):
    """Raised by ``Fix.apply`` when the release resolved the fix's targets yet gives it nothing
    to patch (a data fix none of whose functions is on the route the release takes): the fix is
    not-needed there, not applied to nothing."""


class Fix:
    """One fix, declared: the modules whose import applies it (the first decides its state), the
    shapes of upstream it knows, what it is where none fits, and the tested releases it applies
    on. ``apply`` patches what the shape check resolved (``Resolved``) through the journal."""

    name: str = ""
    summary: str = ""
    modules: tuple[str, ...] = ()
    shapes: tuple[Shape, ...] = ()
    #: The verdict when no shape's ``when`` fits (say, not-needed: the release lacks the problem).
    otherwise: Verdict = Verdict(FixState.NOT_APPLICABLE, "no known shape")
    applies_on: ReleaseRange | None = None
    #: What it reports on a tested release outside ``applies_on`` (core/releases.py): mostly
    #: not-needed, as ``otherwise`` says or as status says of a release without its module.
    outside_range: FixState = FixState.NOT_NEEDED

    def apply(self, found: Resolved, patcher: Patcher) -> None:
        raise NotImplementedError


class FixEntry:
    """One fix as the registry holds it before any of it is imported: its name, the upstream
    modules whose import applies it (the first decides its state), and where its class is, as
    ``"package.module:ClassName"``. The class is imported the first time the fix is needed (one
    of its modules imported, or ``status``), never at start-up; it must declare the same name
    and modules."""

    def __init__(self, name: str, modules: tuple[str, ...], where: str) -> None:
        self.name = name
        self.modules = modules
        self.where = where
        self._fix: Fix | None = None

    def __repr__(self) -> str:
        return f"FixEntry({self.name!r}, {self.modules!r}, {self.where!r})"

    def load(self) -> Fix:
        """The fix, its class imported from ``where`` on first use."""
        if self._fix is None:
            import importlib

            module_name, _, class_name = self.where.partition(":")
            fix_class = getattr(importlib.import_module(module_name), class_name)
            fix = fix_class()
            if (fix.name, tuple(fix.modules)) != (self.name, self.modules):
                raise TypeError(
                    f"{self.where} declares {fix.name} on {fix.modules}, the catalogue "
                    f"{self.name} on {self.modules}"
                )
            self._fix = fix
        return self._fix


@dataclass
class FixStatus:
    name: str
    state: FixState
    reason: str
    #: The tested releases the fix applies on (``Fix.applies_on``), e.g. "0.5.0-0.7.0.2".
    tested: str = ""
