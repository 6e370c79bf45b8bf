"""uninstall() puts every original back, by identity, in every speculators module: also the
name upstream's CLI module binds with ``from ... import`` after our hook wrapped its source."""

from __future__ import annotations

import json

from conftest import run_program

from speculators_qwen_compat.core.startup import ENV_SWITCH


def test_uninstall_restores_every_name_by_identity() -> None:
    result = run_program("uninstall_probe", **{ENV_SWITCH: "off"})
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["a_changed"] == [] and out["a_wrappers"] == []
    assert out["b_changed"] == [] and out["b_wrappers"] == []
    assert out["b_patched"] >= 3  # the fixes were really on in between
    if out["has_cli"]:
        assert out["bound_wrapper"] is True  # the case under test happened
        assert out["a_cli_is_original"] is True
