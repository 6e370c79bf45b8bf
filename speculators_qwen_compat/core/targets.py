"""What a fix declares about upstream (``Target``, ``Shape``, ``ReleaseRange``) and the one shape
check that reads it: ``check`` resolves the targets once, decides the verdict with its reason and
hands the fix the resolved objects (``Resolved``). Nothing here imports upstream: a target outside
the module being imported is read from ``sys.modules`` or looked for on disk."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from speculators_qwen_compat.core.fix import Fix, Verdict, applies, not_applicable
from speculators_qwen_compat.core.upstream import parameters

CALLABLE, SET, ANY = "callable", "set", "any"


@dataclass(frozen=True)
class Target:
    """One upstream name a fix relies on.

    ``params``: parameter names a wrapper reads by name (``"a|b"``: exactly one of the two);
    ``arity``: the exact parameter count, where the count itself matters; ``kind``: a callable,
    a set of strings, or anything present; ``optional``: its absence refuses nothing (present,
    it must fit)."""

    module: str
    path: str
    params: tuple[str, ...] = ()
    arity: int | None = None
    kind: str = CALLABLE
    optional: bool = False

    def __str__(self) -> str:
        return self.path


def present(module: str, path: str) -> Target:
    """A target that only has to exist (for ``Shape.when``)."""
    return Target(module, path, kind=ANY)


@dataclass(frozen=True)
class Shape:
    """One form of upstream a fix knows: chosen when every ``when`` target fits (always, with
    none); then every one of ``targets`` must fit for the fix to apply."""

    label: str
    targets: tuple[Target, ...]
    when: tuple[Target, ...] = ()


def _version_key(version: str) -> tuple[int, ...]:
    from packaging.version import Version

    return Version(version).release


@dataclass(frozen=True)
class ReleaseRange:
    """The tested releases on which a fix applies, oldest and newest. A release past ``last``
    still gets the fix where its targets fit; ``status`` then says it is untested there."""

    first: str
    last: str

    def __contains__(self, version: object) -> bool:
        try:
            key = _version_key(str(version))
        except Exception:  # not a version: outside every span
            return False
        return _version_key(self.first) <= key <= _version_key(self.last)

    def __str__(self) -> str:
        return self.first if self.first == self.last else f"{self.first}-{self.last}"

    @classmethod
    def parse(cls, text: str) -> ReleaseRange:
        first, _, last = text.partition("-")
        return cls(first, last or first)


_DEFERRED = object()  # a target in a module that exists but is not imported yet


@dataclass
class Resolved:
    """What ``check`` resolved for one import: the shape that fits, and each target's object
    (None when absent; only optional targets may be)."""

    module_name: str
    module: ModuleType
    shape: Shape
    hooked: tuple[str, ...]
    objects: dict[Target, Any] = field(default_factory=dict)

    def get(self, target: Target) -> Any:
        value = self.objects.get(target)
        return None if value is _DEFERRED else value

    def has(self, target: Target) -> bool:
        return self.get(target) is not None

    def here(self, target: Target) -> bool:
        """Whether this import patches ``target``: a target is patched when its own module is
        imported if the fix hooks that module, else with the fix's first module."""
        home = target.module if target.module in self.hooked else self.hooked[0]
        return home == self.module_name and self.has(target)

    def owner_and_name(self, target: Target) -> tuple[Any, str]:
        """(owner, attribute) for ``Patcher.wrap``/``replace``: ``Trainer.run_training`` ->
        (the Trainer class, "run_training")."""
        owner_path, _, attribute = target.path.rpartition(".")
        owner: Any = self._module_of(target)
        for part in owner_path.split(".") if owner_path else ():
            owner = getattr(owner, part)
        return owner, attribute

    def _module_of(self, target: Target) -> Any:
        return self.module if target.module == self.module_name else sys.modules[target.module]


def _resolve(target: Target, module_name: str, module: ModuleType) -> Any:
    """The target's object, None when absent, _DEFERRED when its module is not imported yet."""
    if target.module == module_name:
        owner: Any = module
    else:
        owner = sys.modules.get(target.module)
        if owner is not None and _initializing(owner):
            # Imported halfway: its hook fires when it is done (a module importing this one
            # while its own body runs, as speculators.train.data does with .recovery).
            return _DEFERRED
        if owner is None:
            parent = target.module.rpartition(".")[0]
            if target.optional or (parent and parent not in sys.modules):
                return _DEFERRED  # never import anything to find out (a CLI package may be heavy)
            return _DEFERRED if importlib.util.find_spec(target.module) else None
    for part in target.path.split("."):
        owner = getattr(owner, part, None)
        if owner is None:
            return None
    return owner


def _initializing(module: ModuleType) -> bool:
    """Whether ``module``'s body is still running (importlib marks its spec while it runs)."""
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def _mismatch(target: Target, value: Any) -> str | None:
    """Why a present target does not fit, or None."""
    where = f"{target.module}.{target.path}"
    if target.kind == SET:
        return None if isinstance(value, (set, frozenset)) else f"{where} is not a set"
    if target.kind == ANY:
        return None
    if not callable(value):
        return f"{where} is not callable"
    if not (target.params or target.arity is not None):
        return None
    taken = parameters(value)
    if target.arity is not None and len(taken) != target.arity:
        return f"{target.path}{tuple(taken)} does not take {target.arity} parameter(s)"
    absent = []
    for name in target.params:
        choices = name.split("|")
        if sum(choice in taken for choice in choices) != 1:
            absent.append(" or ".join(choices) if len(choices) > 1 else name)
    return f"{target.path} takes no {', '.join(absent)}" if absent else None


def _fits(target: Target, value: Any) -> str | None:
    """Why the target does not fit (absent, or the wrong shape), or None."""
    if value is _DEFERRED:
        return None  # checked when its own module is imported
    if value is None:
        return None if target.optional else f"{target.module} has no {target.path}"
    return _mismatch(target, value)


def _when_fits(shape: Shape, module_name: str, module: ModuleType) -> bool:
    """Whether every target of ``shape.when`` is present and fits: the shape is this release's."""
    for target in shape.when:
        value = _resolve(target, module_name, module)
        if value is None or value is _DEFERRED or _mismatch(target, value):
            return False
    return True


def check(fix: Fix, module_name: str, module: ModuleType) -> tuple[Verdict, Resolved | None]:
    """The verdict for one import of one of ``fix.modules``: the first shape whose ``when``
    fits decides (applied, or not-applicable naming the first target that does not fit); with
    none, ``fix.otherwise`` (e.g. not-needed: this release has no such problem)."""
    for shape in fix.shapes:
        if not _when_fits(shape, module_name, module):
            continue
        found = Resolved(module_name, module, shape, fix.modules)
        for target in shape.targets:
            value = _resolve(target, module_name, module)
            reason = _fits(target, value)
            if reason is not None:
                return not_applicable(reason), None
            found.objects[target] = value
        return applies(shape.label), found
    return fix.otherwise, None
