"""Activation: install/uninstall round trips, the switch, status, and fixes that cannot apply."""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path

import pytest
import wrapt
from conftest import FIXES_OFF, RELEASE, run_program

import speculators_qwen_compat as compat
from speculators_qwen_compat.core.fix import FixState, Route
from speculators_qwen_compat.core.releases import TESTED_RELEASES
from speculators_qwen_compat.core.startup import ENV_SWITCH


def _layers(func: object) -> int:
    count = 0
    while isinstance(func, wrapt.FunctionWrapper):
        count += 1
        func = func.__wrapped__
    return count


#: 0.6+: messages_json hands each batch to datasets, outside the two that read and guard it.
_TYPED = TESTED_RELEASES[str(RELEASE)].fixes.get("messages_json") == FixState.APPLIED


def _stack(func: object) -> list[str]:
    """The fixes whose stages run around an upstream function, outermost first: a shared
    function carries one wrapper, the route (core.fix.Route), holding each fix's stage."""
    names = []
    while isinstance(func, wrapt.FunctionWrapper):
        wrapper = func._self_wrapper  # type: ignore[attr-defined]
        if isinstance(wrapper, Route):
            names += [n for n in wrapper.order if getattr(wrapper.stages, n) is not None]
        else:
            names.append(wrapper.__module__.rsplit(".", 1)[-1])
        func = func.__wrapped__
    return names


def test_install_uninstall_install() -> None:
    import speculators.data_generation.preprocessing as P

    compat.install()
    compat.install()  # a second call changes nothing
    wrapped_layers = _layers(P._preprocess_batch)
    # conversations outside the row guard (and messages_json outside both, 0.6+)
    assert _stack(P._preprocess_batch) == ["messages_json"] * _TYPED + [
        "conversations",
        "row_guard",
    ]
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


def test_disable_after_activation_applies_the_new_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """install(disable=...) on an active install takes the fixes named off, also from under a
    later fix's wrapper, tells status so, exports the set to child interpreters, and puts them
    back in their order when switched on again."""
    import speculators.data_generation.preprocessing as P

    from speculators_qwen_compat.core.startup import ENV_SWITCH

    monkeypatch.setenv(ENV_SWITCH, "on")
    compat.install()
    original = inspect.unwrap(P._preprocess_batch)
    typed = ["messages_json"] * _TYPED
    assert _stack(P._preprocess_batch) == [*typed, "conversations", "row_guard"]
    try:
        compat.install(disable=["row_guard"])  # the innermost wrapper
        states = {s.name: s.state for s in compat.status()}
        assert states["row_guard"] == "disabled"
        assert states["conversations"] == "applied"
        assert _stack(P._preprocess_batch) == [*typed, "conversations"]
        assert inspect.unwrap(P._preprocess_batch) is original
        assert os.environ[ENV_SWITCH] == "off:row_guard"

        compat.install(disable=["conversations"])  # a middle one; row_guard back on
        states = {s.name: s.state for s in compat.status()}
        assert (states["conversations"], states["row_guard"]) == ("disabled", "applied")
        assert _stack(P._preprocess_batch) == [*typed, "row_guard"]
        assert inspect.unwrap(P._preprocess_batch) is original
    finally:
        compat.install(disable=[])
    states = {s.name: s.state for s in compat.status()}
    assert states == TESTED_RELEASES[str(RELEASE)].fixes
    assert _stack(P._preprocess_batch) == [*typed, "conversations", "row_guard"]
    assert os.environ[ENV_SWITCH] == "on"


@pytest.fixture(scope="module")
def default_venv() -> tuple[list[bool], str]:
    """One fresh interpreter with the venv as installed (the switch unset): [wrapped,
    installed] (programs/activation_probe.py), then ``status --json``'s output."""
    result = run_program("activation_probe", "--status")
    assert result.returncode == 0, result.stderr[-3000:]
    first, _, rest = result.stdout.partition("\n")
    if os.environ.get("MATRIX_STATUS_FILE"):  # tools/matrix.py's release x fix table reads it
        Path(os.environ["MATRIX_STATUS_FILE"]).write_text(rest)
    return json.loads(first), rest


def test_status_json_per_release(default_venv: tuple[list[bool], str]) -> None:
    assert default_venv[0] == [True, True]  # the venv as installed: upstream wrapped at import
    report = json.loads(default_venv[1])
    assert report["speculators"] == str(RELEASE)
    assert report["tested"] is True, f"{RELEASE} is not in releases.TESTED_RELEASES"
    states = {p["name"]: p["state"] for p in report["patches"]}
    assert states == TESTED_RELEASES[str(RELEASE)].fixes


# once, on the newest release: the switch is read at start-up, before any fix of any release
# is installed (each release's fixes switched on: test_status_json_per_release)
@pytest.mark.pure
def test_switched_off_venv_wide_leaves_upstream_untouched() -> None:
    off = run_program("activation_probe", **FIXES_OFF)
    assert off.returncode == 0, off.stderr[-3000:]
    assert json.loads(off.stdout) == [False, False]


@pytest.mark.pure  # the switch's own parsing; the named fixes apply on every release
def test_single_fixes_switched_off_by_name() -> None:
    result = run_program("fix_states", **{ENV_SWITCH: "off:row_guard,run_report"})
    states = json.loads(result.stdout.strip().splitlines()[-1])
    assert states["row_guard"] == states["run_report"] == FixState.DISABLED
    assert states["conversations"] == FixState.APPLIED


@pytest.mark.pure  # a stand-in module and a registry of its own: no release involved
def test_a_fix_that_cannot_apply_never_breaks_the_import() -> None:
    result = run_program("cannot_apply", **FIXES_OFF)
    assert result.returncode == 0, result.stderr
    failed = [FixState.FAILED] * 3
    nothing = FixState.NOT_NEEDED  # NothingToPatch: not-needed, its wrapper taken back too
    assert result.stdout.split() == ["original", *failed, nothing, "original"]
