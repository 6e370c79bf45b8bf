"""Activation: install/uninstall round trips, the switch, status, and fixes that cannot apply."""

from __future__ import annotations

import inspect
import json
import os
import textwrap
from pathlib import Path

import pytest
import wrapt
from conftest import RELEASE, run_python

import speculators_qwen_compat as compat
from speculators_qwen_compat.core.releases import TESTED_RELEASES


def _layers(func: object) -> int:
    count = 0
    while isinstance(func, wrapt.FunctionWrapper):
        count += 1
        func = func.__wrapped__
    return count


def test_install_uninstall_install() -> None:
    import speculators.data_generation.preprocessing as P

    compat.install()
    compat.install()  # a second call changes nothing
    wrapped_layers = _layers(P._preprocess_batch)
    assert wrapped_layers == 2  # conversations outside, row guard inside
    original = inspect.unwrap(P._preprocess_batch)
    compat.uninstall()
    try:
        assert P._preprocess_batch is original
        assert not compat.installed()
        assert {s.state for s in compat.status()} == {"inactive"}
    finally:
        compat.install()
    assert _layers(P._preprocess_batch) == wrapped_layers
    assert inspect.unwrap(P._preprocess_batch) is original


def _outer_fix(func: object) -> str:
    """The fix module whose wrapper is outermost on an upstream function."""
    return func._self_wrapper.__module__.rsplit(".", 1)[-1]  # type: ignore[attr-defined]


def test_disable_after_activation_applies_the_new_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """install(disable=...) on an active install takes the fixes named off, also from under a
    later fix's wrapper, tells status so, exports the set to child interpreters, and puts them
    back in their order when switched on again."""
    import speculators.data_generation.preprocessing as P

    from speculators_qwen_compat.core.startup import ENV_SWITCH

    monkeypatch.setenv(ENV_SWITCH, "on")
    compat.install()
    original = inspect.unwrap(P._preprocess_batch)
    assert _outer_fix(P._preprocess_batch) == "conversations"
    assert _outer_fix(P._preprocess_batch.__wrapped__) == "row_guard"
    try:
        compat.install(disable=["row_guard"])  # the inner wrapper of two
        states = {s.name: s.state for s in compat.status()}
        assert states["row_guard"] == "disabled"
        assert states["conversations"] == "applied"
        assert _layers(P._preprocess_batch) == 1
        assert _outer_fix(P._preprocess_batch) == "conversations"
        assert P._preprocess_batch.__wrapped__ is original
        assert os.environ[ENV_SWITCH] == "off:row_guard"

        compat.install(disable=["conversations"])  # the outer one; row_guard back on
        states = {s.name: s.state for s in compat.status()}
        assert (states["conversations"], states["row_guard"]) == ("disabled", "applied")
        assert _outer_fix(P._preprocess_batch) == "row_guard"
        assert P._preprocess_batch.__wrapped__ is original
    finally:
        compat.install(disable=[])
    states = {s.name: s.state for s in compat.status()}
    assert states == TESTED_RELEASES[str(RELEASE)].fixes
    assert _outer_fix(P._preprocess_batch) == "conversations"
    assert _outer_fix(P._preprocess_batch.__wrapped__) == "row_guard"
    assert os.environ[ENV_SWITCH] == "on"


PATCHED = (
    "import speculators.data_generation.preprocessing as P, speculators_qwen_compat as c;"
    "print(hasattr(P._preprocess_batch, '__wrapped__'), c.installed())"
)
STATUS = "from speculators_qwen_compat.__main__ import main; main(['status', '--json'])"


@pytest.fixture(scope="module")
def default_venv() -> tuple[list[str], str]:
    """One fresh interpreter with the venv as installed (the switch unset): PATCHED's words,
    then ``status --json``'s output."""
    result = run_python(PATCHED + "\n" + STATUS)
    assert result.returncode == 0, result.stderr[-3000:]
    first, _, rest = result.stdout.partition("\n")
    return first.split(), rest


def test_status_json_per_release(default_venv: tuple[list[str], str]) -> None:
    report = json.loads(default_venv[1])
    assert report["speculators"] == str(RELEASE)
    assert report["tested"] is True, f"{RELEASE} is not in releases.TESTED_RELEASES"
    states = {p["name"]: p["state"] for p in report["patches"]}
    assert states == TESTED_RELEASES[str(RELEASE)].fixes


def test_switched_off_venv_wide_leaves_upstream_untouched(
    default_venv: tuple[list[str], str],
) -> None:
    assert run_python(PATCHED, SPECULATORS_QWEN_COMPAT="0").stdout.split() == ["False", "False"]
    assert default_venv[0] == ["True", "True"]


def test_single_fixes_switched_off_by_name() -> None:
    code = (
        "import json, speculators_qwen_compat as c;"
        "print(json.dumps({s.name: s.state for s in c.status()}))"
    )
    result = run_python(code, SPECULATORS_QWEN_COMPAT="off:row_guard,run_report")
    states = json.loads(result.stdout.strip().splitlines()[-1])
    assert states["row_guard"] == states["run_report"] == "disabled"
    assert states["conversations"] == "applied"


@pytest.mark.pure  # a stand-in package and the registry alone: no release involved
def test_a_fix_that_cannot_apply_never_breaks_the_import(tmp_path: Path) -> None:
    package = tmp_path / "victim"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "target.py").write_text(
        "def f():\n    return 'original'\n\n"
        "def __getattr__(name):\n    raise RuntimeError('no such thing')\n"
    )
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from speculators_qwen_compat.core.registry import Fix, _Registry
        from speculators_qwen_compat.core.targets import Shape, Target

        class Raises(Fix):
            name, modules = "raises", ("victim.target",)
            shapes = (Shape("fits", (Target("victim.target", "f"),)),)
            def apply(self, found, patcher):
                patcher.wrap(*found.place(self.shapes[0].targets[0]), lambda w, i, a, k: "patched")
                raise RuntimeError("boom")

        class BadShape(Fix):  # looking its target up raises
            name, modules = "bad_shape", ("victim.target",)
            shapes = (Shape("never", (Target("victim.target", "missing"),)),)

        registry = _Registry([Raises(), BadShape()])
        registry.install(())
        import victim.target
        states = registry.states
        print(victim.target.f(), states["raises"].state, states["bad_shape"].state)
        registry.uninstall()
        print(victim.target.f())
    """)
    result = run_python(code, SPECULATORS_QWEN_COMPAT="0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["original", "failed", "failed", "original"]
