"""Pins of upstream behaviour: what the installed release does without our fixes.

Each test runs the release as installed (the venv-wide .pth switched off) and asserts the problem
a fix exists for, with the expectation of this release. When a release stops showing the problem
the assertion fails and says which fix can be retired for it. The probes (programs/
upstream_pins.py, one function each) run in one fresh interpreter per session (conftest ``pins``,
which test_data_order.py reads too).
"""

from __future__ import annotations

import json

from conftest import RELEASE, RENDERS
from packaging.version import Version
from programs.upstream_pins import FAILED


def _upstream(pins: dict[str, str], name: str) -> str:
    out = pins[name]
    assert not out.startswith(FAILED), out
    return out


def test_mask_probe(pins: dict[str, str]) -> None:
    out = _upstream(pins, "mask_probe")
    if RENDERS:
        assert out == "absent", "0.8+ grew an assistant-mask probe: check mask_probe's shape"
    elif Version("0.6") > RELEASE:
        assert out == "raised TemplateError No user query found in messages.", (
            f"{RELEASE} no longer crashes in the probe ({out}): mask_probe can be retired here"
        )
    else:
        assert out == "returned False"


def test_openai_messages_give_no_rows(pins: dict[str, str]) -> None:
    out = _upstream(pins, "openai_messages")
    expected = "raised IndexError" if Version("0.7") > RELEASE else "raised ValueError No samples"
    assert out.startswith(expected), (
        f"{RELEASE} now reads OpenAI 'messages' ({out}): the conversations fix's column "
        "lookup can be retired here"
    )


def test_non_mapping_turn_kills_the_map(pins: dict[str, str]) -> None:
    out = _upstream(pins, "non_mapping_turn_kills_the_map")
    assert out == "raised AttributeError", (
        f"{RELEASE} survives a non-mapping turn ({out}): the conversations fix's guard against "
        "it can be retired here"
    )


def test_template_error_in_one_row(pins: dict[str, str]) -> None:
    """<= 0.6 let a TemplateError out of the per-row try; 0.7 catch it; 0.8+ swallow it."""
    out = _upstream(pins, "template_error_in_one_row")
    if RENDERS:
        assert out == "render-shape"
    elif Version("0.7") > RELEASE:
        assert out == "raised TemplateError System message must be at the beginning.", (
            f"{RELEASE} now survives a template error per row ({out}): row_guard's per-row "
            "try can be retired here (its counting stays)"
        )
    else:
        assert out == "rows 0"


def test_normalisation_of_roles_reasoning_and_tool_calls(pins: dict[str, str]) -> None:
    out = _upstream(pins, "normalisation_of_roles_reasoning_and_tool_calls")
    roles, has_reasoning, args_type = json.loads(out)
    if RENDERS:
        assert roles == ["assistant", "user", "assistant"], "developer no longer -> assistant"
    else:
        assert roles == ["user", "assistant"], "unknown roles are no longer dropped"
    assert has_reasoning == (Version("0.6") <= RELEASE), "reasoning_content handling changed"
    assert args_type == ("str" if Version("0.6") <= RELEASE else "NoneType"), (
        f"{RELEASE} changed tool-call arguments ({args_type}): check the conversations fix"
    )


def test_render_endpoint_is_required(pins: dict[str, str]) -> None:
    out = _upstream(pins, "render_endpoint_is_required")
    if RENDERS:
        assert out == "raised render_endpoint is required to", (
            f"{RELEASE} prepares data without a server ({out}): local_render may be retired"
        )
    else:
        assert out == "no-render"
