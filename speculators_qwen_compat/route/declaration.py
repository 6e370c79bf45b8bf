"""What a route is (``Call``, ``Stage``), which generation the installed release is, and the three
readers of one declaration: ``install`` (a fix's wrappers, from the tree), ``lines`` (``status
--route``) and ``watched`` (the functions tests/programs/route_trace.py traces). A function
several fixes wrap carries one wrapper whose stages run in the tree's order (core/fix.py Route)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

from speculators_qwen_compat.core.fix import Fix, NothingToPatch, Patcher
from speculators_qwen_compat.core.targets import Resolved, Target
from speculators_qwen_compat.core.upstream import PREPROCESSING

PACKAGE = "speculators_qwen_compat"
#: A stage: wrapt's ``wrapper(wrapped, instance, args, kwargs)``.
Wrapper = Callable[[Any, Any, tuple, dict], Any]


@dataclass(frozen=True)
class Stage:
    """One fix acting at one upstream function: what it does there, and its wrapper (None: it
    acts without one, e.g. the entry point's argument rewriting, a value replaced)."""

    fix: str
    does: str
    wrapper: Wrapper | None = None


@dataclass(frozen=True)
class Call:
    """One upstream function as a row meets it: its stages outer to inner, the calls it makes
    that the route shows, in the order it makes them; ``when``: a call only some runs make;
    ``bound_in``: modules that bind the function by ``from ... import`` (wrapped there too)."""

    module: str
    path: str
    stages: tuple[Stage, ...] = ()
    calls: tuple[Call, ...] = ()
    when: str = ""
    bound_in: tuple[str, ...] = ()

    @property
    def order(self) -> tuple[str, ...]:
        """The fixes whose wrappers this function carries, outer to inner."""
        return tuple(stage.fix for stage in self.stages if stage.wrapper is not None)

    def walk(self, depth: int = 0) -> Iterator[tuple[int, Call]]:
        """Every call of the tree, callers before callees, with its depth."""
        yield depth, self
        for call in self.calls:
            yield from call.walk(depth + 1)


def at(
    depth: int, module: str, path: str, *stages: Stage, when: str = "", bound_in: tuple = ()
) -> tuple[int, Call]:
    """One line of a route as a generation module writes it (``nest``): a call at ``depth``."""
    return depth, Call(module, path, stages, when=when, bound_in=bound_in)


def nest(*lines: tuple[int, Call]) -> Call:
    """The tree the lines draw, each call under the nearest line above it one level up."""

    def build(i: int) -> tuple[Call, int]:
        depth, node = lines[i]
        calls, j = [], i + 1
        while j < len(lines) and lines[j][0] > depth:
            if lines[j][0] != depth + 1:
                raise ValueError(f"{lines[j][1].path}: two levels below {node.path}")
            inner, j = build(j)
            calls.append(inner)
        return replace(node, calls=tuple(calls)), j

    root, end = build(0)
    if end != len(lines):
        raise ValueError(f"{lines[end][1].path}: outside the route's first call")
    return root


def generation(preprocessing: ModuleType | None = None) -> ModuleType:
    """The route module of the installed release: render.py where upstream renders through vLLM's
    request handling (0.8+: ``render_conversation``), else script.py (<= 0.7)."""
    from speculators_qwen_compat.route import render, script

    module = preprocessing or sys.modules.get(PREPROCESSING)
    return render if module is not None and hasattr(module, render.MARK) else script


def present(call: Call) -> Any:
    """Upstream's object for ``call`` (None when the release or its imports lack it)."""
    owner: Any = sys.modules.get(call.module)
    if owner is None and call.module.startswith(f"{PACKAGE}."):  # our stand-in: cheap
        owner = importlib.import_module(call.module)
    for part in call.path.split("."):
        owner = getattr(owner, part, None)
    return owner


def shown(call: Call) -> Iterator[tuple[int, Call]]:
    """The tree as the installed release has it: a call absent from it is left out and the
    calls under it move up to its caller."""

    def visit(node: Call, depth: int) -> Iterator[tuple[int, Call]]:
        here = present(node) is not None
        if here:
            yield depth, node
        for inner in node.calls:
            yield from visit(inner, depth + 1 if here else depth)

    yield from visit(call, 0)


def install(fix: str, found: Resolved, patcher: Patcher) -> None:
    """Wrap, as ``fix``'s stage, each function the installed generation's route gives it a
    wrapper at and that this import resolved (``found``): once per function, however many
    places of the tree call it."""
    done: set[tuple[str, str]] = set()
    for _, call in generation(_preprocessing(found)).ROUTE.walk():
        stage = next((s for s in call.stages if s.fix == fix and s.wrapper), None)
        if stage is None or (call.module, call.path) in done:
            continue
        done.add((call.module, call.path))
        home = _target(found, call.module, call.path)
        if home is not None and found.here(home):
            patcher.wrap_stage(*found.owner_and_name(home), call.order, fix, stage.wrapper)
        for module in call.bound_in:
            binding = _target(found, module, call.path)
            if binding is None or not found.here(binding):
                continue
            if home is not None and found.get(binding) is found.get(home):
                # bound by ``from ... import`` after we wrapped its source: our wrapper already;
                # uninstall() must put the original back there too
                original = patcher.original_of(*found.owner_and_name(home))
                patcher.adopt(*found.owner_and_name(binding), original)
            else:
                patcher.wrap_stage(*found.owner_and_name(binding), call.order, fix, stage.wrapper)


def _preprocessing(found: Resolved) -> ModuleType | None:
    return found.module if found.module_name == PREPROCESSING else None


def _target(found: Resolved, module: str, path: str) -> Target | None:
    """The target of the fix's shape naming ``module.path``, when this import resolved it."""
    for target in found.shape.targets:
        if (target.module, target.path) == (module, path) and found.has(target):
            return target
    return None


def watched() -> dict[str, Any]:
    """Declared path -> upstream's function, for every call of the installed generation's route
    the release has (tests/programs/route_trace.py)."""
    return {call.path: present(call) for _, call in shown(generation().ROUTE)}


def lines(acting: set[str], preprocessing: ModuleType | None = None) -> list[str]:
    """``status --route``: the installed generation's route (of ``preprocessing``, upstream's
    module), each call indented under its caller, with the stages of the fixes in ``acting``
    (and the entry point's) under it."""
    route = generation(preprocessing)
    out = [f"the route of a prepare_data row ({route.GENERATION} generation, {route.RELEASES}):"]
    for depth, call in shown(route.ROUTE):
        indent = "  " * (depth + 1)
        where = "" if call.module == PREPROCESSING else f"  [{call.module}]"
        when = f"  ({call.when})" if call.when else ""
        out.append(f"{indent}{call.path}{where}{when}")
        for stage in call.stages:
            if stage.fix in acting or stage.fix == ENTRY_POINT:
                out.append(f"{indent}    {stage.fix}: {stage.does}")
    return out


#: The stage name of what our entry point does around upstream's command (no switch of its own).
ENTRY_POINT = "entry point"


class RouteFix(Fix):
    """A data-preparation fix as a declaration (name, summary, targets, releases): its wrappers
    stand in the installed generation's route, which places them (``install``)."""

    def apply(self, found: Resolved, patcher: Patcher) -> None:
        # the release's generation is known once upstream's preprocessing module is imported
        preprocessing = _preprocessing(found) or sys.modules.get(PREPROCESSING)
        route = generation(preprocessing)
        wraps = any(stage.fix == self.name and stage.wrapper for stage in _stages(route.ROUTE))
        if preprocessing is not None and not wraps:
            raise NothingToPatch(
                f"none of its functions is on this release's route ({route.GENERATION} "
                f"generation, {route.RELEASES})"
            )
        install(self.name, found, patcher)


def _stages(route: Call) -> Iterator[Stage]:
    for _, call in route.walk():
        yield from call.stages
