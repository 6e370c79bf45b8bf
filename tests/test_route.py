"""The routes declared in speculators_qwen_compat/route/ are the ones applied: every upstream
function a data fix wraps (and every training function several fixes wrap) carries one wrapper
(``core.fix.Route``) whose stages are the declared fixes applied on this release, in the declared
order; each stage is its fix's, at a target its fix declares; and a Route runs its stages outer
to inner, a stage left unset (its fix switched off) skipped. The order a real run meets them:
test_route_trace.py."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import run_program

from speculators_qwen_compat.core.fix import Patcher, Route
from speculators_qwen_compat.fixes import ALL_FIXES
from speculators_qwen_compat.fixes.training.stages import ORDER
from speculators_qwen_compat.route import render, script
from speculators_qwen_compat.route.declaration import ENTRY_POINT, Call

GENERATIONS = (render, script)


def _calls() -> list[Call]:
    return [call for route in GENERATIONS for _, call in route.ROUTE.walk()]


def test_every_stage_is_a_fix_at_a_target_it_declares() -> None:
    """A stage of each fix, at a function one of that fix's shapes names (where install()
    finds it); the entry point's own stage wraps nothing."""
    fixes = {entry.name: entry.load() for entry in ALL_FIXES}
    for call in _calls():
        for stage in call.stages:
            if stage.fix == ENTRY_POINT:
                assert stage.wrapper is None
                continue
            assert stage.fix in fixes, f"{call.path}: no fix named {stage.fix}"
            if stage.wrapper is None:
                continue
            fix = fixes[stage.fix]
            targets = {(t.module, t.path) for shape in fix.shapes for t in shape.targets}
            assert (call.module, call.path) in targets, f"{stage.fix} declares no {call.path}"


def test_a_function_called_at_two_places_carries_one_set_of_stages() -> None:
    """Its one wrapper: wherever a route shows it, the same stages in the same order."""
    for route in GENERATIONS:
        seen: dict[tuple[str, str], tuple] = {}
        for _, call in route.ROUTE.walk():
            key = (call.module, call.path)
            assert seen.setdefault(key, call.stages) == call.stages, call.path


def test_each_shared_function_is_wrapped_once_with_the_declared_stages() -> None:
    result = run_program("route_stages")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    applied = {name for name, state in report["states"].items() if state == "applied"}
    assert report["routes"], "no shared function found: the program looked in the wrong place"
    orders = {call.path: call.order for call in _calls()} | ORDER
    for path, seen in report["routes"].items():
        expected = [fix for fix in orders[path] if fix in applied]
        if len(expected) == 0:
            continue
        assert seen["route"], f"{path}: not wrapped through a Route"
        assert seen["stages"] == expected, path
        assert seen["wrappers_inside"] == 0, f"{path}: another wrapper of ours inside the route"


def _upstream(value: int) -> list[str]:
    return [f"upstream {value}"]


def test_a_route_runs_its_stages_outer_to_inner_and_undoes_cleanly() -> None:
    def stage(label: str) -> Any:
        def wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> list[str]:
            return [f"{label} in", *wrapped(*args, **kwargs), f"{label} out"]

        return wrapper

    owner = SimpleNamespace(target=_upstream)  # as a module holds a function
    patcher = Patcher()
    order = ("outer", "middle", "inner")
    # applied in another order than declared: the declaration decides
    patcher.wrap_stage(owner, "target", order, "inner", stage("inner"))
    mark = patcher.mark()
    patcher.wrap_stage(owner, "target", order, "outer", stage("outer"))
    assert owner.target(1) == ["outer in", "inner in", "upstream 1", "inner out", "outer out"]
    patcher.wrap_stage(owner, "target", order, "middle", stage("middle"))
    assert owner.target(2)[:3] == ["outer in", "middle in", "inner in"]
    assert isinstance(owner.target._self_wrapper, Route)
    patcher.restore(mark)  # the stages set after the mark come off; the route stays
    assert owner.target(3) == ["inner in", "upstream 3", "inner out"]
    patcher.restore()
    assert owner.target is _upstream


def test_the_catalogue_names_each_fix_as_its_class_declares_it() -> None:
    """ALL_FIXES holds "module:Class" strings: each names a class of that module declaring the
    same fix name and target modules (the registry hooks those before importing it)."""
    import importlib

    assert len({entry.name for entry in ALL_FIXES}) == len(ALL_FIXES)
    for entry in ALL_FIXES:
        module_name, _, class_name = entry.where.partition(":")
        fix_class = getattr(importlib.import_module(module_name), class_name)
        assert (fix_class.name, fix_class.modules) == (entry.name, entry.modules)


def test_status_route_names_the_generation_of_the_module_it_is_given() -> None:
    """``status --route`` imports upstream's preprocessing itself and hands it over: the route
    is the release's even when nothing imported that module first (fixes switched off, or an
    activation that failed), not the script generation by default."""
    from speculators_qwen_compat.route.declaration import lines

    renders = SimpleNamespace(**{render.MARK: object()})
    assert lines(set(), renders)[0].startswith(
        f"the route of a prepare_data row ({render.GENERATION} "
    )
    assert lines(set(), SimpleNamespace())[0].startswith(
        f"the route of a prepare_data row ({script.GENERATION} "
    )


def test_a_fix_off_the_releases_route_is_not_needed_rather_than_applied_to_nothing() -> None:
    """A release with the render generation's mark that still has a script-only fix's
    functions (an untested hybrid): that fix's apply says so, and the registry records it as
    not-needed (core/registry.py), instead of "applied" with no wrapper in place."""
    from speculators_qwen_compat.core.fix import NothingToPatch
    from speculators_qwen_compat.core.upstream import PREPROCESSING

    def wrapping(route: Any) -> set[str]:
        return {s.fix for _, c in route.ROUTE.walk() for s in c.stages if s.wrapper}

    script_only = sorted(wrapping(script) - wrapping(render))
    assert script_only  # mask_probe, offsets_loss_mask, forked_tokenizer today
    fixes = {entry.name: entry.load() for entry in ALL_FIXES}
    hybrid = SimpleNamespace(
        module_name=PREPROCESSING, module=SimpleNamespace(**{render.MARK: object()})
    )
    for name in script_only:
        with pytest.raises(NothingToPatch, match=f"{render.GENERATION} generation"):
            fixes[name].apply(hybrid, Patcher())


def test_status_route_imports_upstream_itself(monkeypatch: Any, capsys: Any) -> None:
    """``status --route`` names the generation of upstream's module as it imports it, though no
    fix imported it first; an upstream that does not import is one error line and exit 1."""
    import importlib
    import sys

    from speculators_qwen_compat import __main__ as command
    from speculators_qwen_compat.core.upstream import PREPROCESSING

    report = {"speculators": "9.9", "tested": False, "patches": []}
    monkeypatch.delitem(sys.modules, PREPROCESSING, raising=False)
    renders = SimpleNamespace(**{render.MARK: object()})
    real = importlib.import_module
    monkeypatch.setattr(
        importlib,
        "import_module",
        lambda name, *a: renders if name == PREPROCESSING else real(name, *a),
    )
    assert command._print_route(report) == 0
    assert f"({render.GENERATION} generation" in capsys.readouterr().out

    def broken(name: str, *a: Any) -> Any:
        if name == PREPROCESSING:
            raise ImportError("a broken install")
        return real(name, *a)

    monkeypatch.setattr(importlib, "import_module", broken)
    assert command._print_route(report) == 1
    said = capsys.readouterr()
    assert not said.out.count("\n") > 1  # the release line only
    assert (
        said.err.startswith("speculators_qwen_compat: error: ") and "a broken install" in said.err
    )
