"""Pins of upstream behaviour: what the installed release does without our fixes.

Each test runs the release as installed (the venv-wide .pth switched off) and asserts the problem
a fix exists for, with the expectation of this release. When a release stops showing the problem
the assertion fails and says which fix can be retired for it. The tests' probes run in one fresh
interpreter (BATCH: each probe on its own globals and its own stdout), started once per module.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import RELEASE, RENDERS, run_upstream
from packaging.version import Version

PRELUDE = r"""
import json, sys
PATTERN = r"<\|im_start\|>assistant\n(.*?)<\|im_end\|>"
import speculators.data_generation.preprocessing as P
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained({model!r})
"""


BATCH = r"""
import contextlib, io
results = {}
for name, body in probes.items():
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(body, dict(globals()))
        lines = out.getvalue().strip().splitlines()
        results[name] = lines[-1] if lines else "printed nothing"
    except BaseException as exc:
        results[name] = f"probe failed: {type(exc).__name__}: {exc}"
print(json.dumps(results))
"""
FAILED = "probe failed: "


@pytest.fixture(scope="module")
def pins(qwen36_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every probe below in one interpreter of the release as installed: name -> last line."""
    work = tmp_path_factory.mktemp("pins")
    data = work / "openai.jsonl"
    row = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    data.write_text("\n".join([json.dumps(row)] * 3) + "\n")
    extra = "render_endpoint='http://127.0.0.1:9'" if RENDERS else "assistant_pattern=PATTERN"
    probes = dict(PROBES)
    probes["openai_messages"] = OPENAI_MESSAGES.format(
        model=str(qwen36_dir), data=str(data), tf=str(work / "tf.pt"), extra=extra
    )
    listed = work / "probes.json"
    listed.write_text(json.dumps(probes), "utf-8")
    read = f"probes = json.loads(open({str(listed)!r}, encoding='utf-8').read())\n"
    result = run_upstream(PRELUDE.format(model=str(qwen36_dir)) + read + BATCH)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _upstream(pins: dict[str, str], name: str) -> str:
    out = pins[name]
    assert not out.startswith(FAILED), out
    return out


MASK_PROBE = """
if not hasattr(P, "_supports_assistant_mask"):
    print("absent")
else:
    try:
        print("returned", P._supports_assistant_mask(tok))
    except Exception as exc:
        print("raised", type(exc).__name__, exc)
"""


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


OPENAI_MESSAGES = """
try:
    ds, _ = P.load_and_preprocess_dataset(
        {model!r}, [{data!r}], seq_length=256, build_dataset_num_proc=1,
        token_freq_path={tf!r}, {extra})
    print("rows", len(ds))
except Exception as exc:
    print("raised", type(exc).__name__, str(exc)[:24])
"""


def test_openai_messages_give_no_rows(pins: dict[str, str]) -> None:
    out = _upstream(pins, "openai_messages")
    expected = "raised IndexError" if Version("0.7") > RELEASE else "raised ValueError No samples"
    assert out.startswith(expected), (
        f"{RELEASE} now reads OpenAI 'messages' ({out}): the conversations fix's column "
        "lookup can be retired here"
    )


NON_MAPPING_TURN_KILLS_THE_MAP = """
batch = {"conversations": [
    [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}],
    ["not a turn"],
]}
args = (batch, False, "http://127.0.0.1:9", 256) if hasattr(P, "_render_conversation_rows") \
    else (batch, tok, 256, PATTERN)
try:
    P._preprocess_batch(*args)
    print("survived")
except Exception as exc:
    print("raised", type(exc).__name__)
"""


def test_non_mapping_turn_kills_the_map(pins: dict[str, str]) -> None:
    out = _upstream(pins, "non_mapping_turn_kills_the_map")
    assert out == "raised AttributeError", (
        f"{RELEASE} survives a non-mapping turn ({out}): the conversations fix's guard against "
        "it can be retired here"
    )


TEMPLATE_ERROR_IN_ONE_ROW = """
late_system = [{"role": "user", "content": "hi"}, {"role": "system", "content": "late"},
               {"role": "assistant", "content": "yo"}]
if hasattr(P, "_render_conversation_rows"):
    print("render-shape")
else:
    batch = {"conversations": [late_system]}
    try:
        out = P._preprocess_batch(batch, tok, 256, PATTERN)
        print("rows", len(out["input_ids"]))
    except Exception as exc:
        print("raised", type(exc).__name__, exc)
"""


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


NORMALISATION = """
conv = [
    {"role": "developer", "content": "be brief"},
    {"role": "user", "content": "weather?"},
    {"role": "assistant", "content": "", "reasoning_content": "call it",
     "tool_calls": [{"type": "function", "function": {"name": "w", "arguments": "{\\"c\\": 1}"}}]},
]
norm = P._normalize_conversation(conv)
roles = [t["role"] for t in norm]
last = norm[-1]
args = last.get("tool_calls", [{}])[0].get("function", {}).get("arguments")
print(json.dumps([roles, "reasoning_content" in last, type(args).__name__]))
"""


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


RENDER_ENDPOINT_IS_REQUIRED = """
from datasets import Dataset
if not hasattr(P, "build_speculator_training_dataset"):
    print("no-render")
else:
    ds = Dataset.from_dict({"conversations": [[{"role": "user", "content": "hi"}]]})
    try:
        P.build_speculator_training_dataset(ds, tok, 256, 1, render_endpoint=None)
        print("built")
    except ValueError as exc:
        print("raised", str(exc)[:30])
"""


def test_render_endpoint_is_required(pins: dict[str, str]) -> None:
    out = _upstream(pins, "render_endpoint_is_required")
    if RENDERS:
        assert out == "raised render_endpoint is required to", (
            f"{RELEASE} prepares data without a server ({out}): local_render may be retired"
        )
    else:
        assert out == "no-render"


#: The probes without parameters, by name (``pins`` adds OPENAI_MESSAGES, formatted).
PROBES = {
    "mask_probe": MASK_PROBE,
    "non_mapping_turn_kills_the_map": NON_MAPPING_TURN_KILLS_THE_MAP,
    "template_error_in_one_row": TEMPLATE_ERROR_IN_ONE_ROW,
    "normalisation_of_roles_reasoning_and_tool_calls": NORMALISATION,
    "render_endpoint_is_required": RENDER_ENDPOINT_IS_REQUIRED,
}
