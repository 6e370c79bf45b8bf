"""``--render-endpoint``: prepare_data through a real vLLM 0.32 render server and locally give the
same rows and the same skips (0.8+), tool-call conversations kept in both.

The server is the session's ``vllm_render("qwen36")`` (tests/vllm_server.py: ``vllm launch
render`` on a weight-less folder with the real Qwen3.6 vocabulary and the Qwen3.6-style
template); the local run renders in-process (the default when the flag is omitted). The data
mixes the sample conversations (tool calls with JSON-string arguments, parts, reasoning) with
tool calls in other shapes real data has and with rows the template or the normaliser rejects.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    good_rows,
    read_report,
    rejected_rows,
    release_command,
    write_dataset,
)
from mask_oracle import load_rows
from packaging.version import Version

from speculators_qwen_compat.core.releases import TESTED_RELEASES

ROOT = Path(__file__).resolve().parents[1]
#: The releases that render through /render; each runs here in its own environment, so the
#: matrix's one ``vllm`` pass (one server) covers all of them.
RENDER_RELEASES = [r for r in TESTED_RELEASES if Version("0.8") <= Version(r)]

TOOL_CALL = 248058  # <tool_call> in the real vocabulary
TOOL = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look a word up.",
        "parameters": {"type": "object", "properties": {"word": {"type": "string"}}},
        "strict": True,
    },
}


def _tool_rows() -> list[dict[str, Any]]:
    """Tool calls the way other clients write them: object arguments, no ids, several calls,
    tool results as parts lists, reasoning under ``reasoning``."""
    ask = {"role": "user", "content": "Look up «Straße» and 東京, please."}
    calls = [
        {"type": "function", "function": {"name": "lookup", "arguments": {"word": "Straße"}}},
        {"type": "function", "function": {"name": "lookup", "arguments": '{"word": "東京"}'}},
    ]
    return [
        {
            "tools": [TOOL],
            "messages": [
                ask,
                {"role": "assistant", "content": None, "tool_calls": calls, "reasoning": "Two."},
                {"role": "tool", "content": [{"type": "text", "text": "street"}]},
                {
                    "role": "tool",
                    "content": [
                        {"type": "text", "text": "Tokyo"},
                        {"type": "text", "text": "(capital)"},
                    ],
                },
                {"role": "assistant", "content": "Straße = street; 東京 = Tokyo."},
            ],
        },
        {
            "tools": [TOOL],
            "messages": [
                {"role": "system", "content": [{"type": "text", "text": "Be exact."}]},
                ask,
                {"role": "assistant", "content": "Checking.", "tool_calls": calls[1:]},
                {"role": "tool", "content": "Tokyo", "tool_call_id": "x"},
                {"role": "assistant", "content": "東京 is Tokyo.", "reasoning_content": "ok"},
            ],
        },
    ]


def _bad_arguments_rows() -> list[dict[str, Any]]:
    rows = []
    for arguments in ("{not json", "[1, 2]"):
        call = {"type": "function", "function": {"name": "lookup", "arguments": arguments}}
        rows.append(
            {
                "tools": [TOOL],
                "messages": [
                    {"role": "user", "content": "Look it up."},
                    {"role": "assistant", "content": "", "tool_calls": [call]},
                    {"role": "tool", "content": "?"},
                    {"role": "assistant", "content": "Done."},
                ],
            }
        )
    return rows


def _prepare_on(release: str, model: Path, output: Path, data: Path, *extra: str):
    """prepare_data of ``release`` (tools/release_python.sh), whatever release runs pytest."""
    command, env = release_command(
        release, "-m", "speculators_qwen_compat.prepare_data", "--model", str(model),
        "--data", str(data), "--output", str(output), "--seq-length", "512",
        "--num-preprocessing-workers", "1", *extra,
    )  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)


@pytest.mark.vllm
@pytest.mark.parametrize("release", RENDER_RELEASES)
def test_local_and_real_vllm_give_identical_rows(
    release: str, vllm_render: Any, tmp_path: Path
) -> None:
    good = good_rows(12) + _tool_rows()
    rejected = [row for _, row in rejected_rows()] + _bad_arguments_rows()
    rows = good + rejected
    data = write_dataset(tmp_path / "d.jsonl", rows)
    model, server = vllm_render("qwen36")
    local = _prepare_on(release, model, tmp_path / "local", data)  # omitted flag: local
    assert local.returncode == 0, local.stderr[-3000:]
    assert "no --render-endpoint given: rendering locally" in local.stderr
    http = _prepare_on(release, model, tmp_path / "http", data, "--render-endpoint", server.url)
    assert http.returncode == 0, http.stderr[-3000:]

    local_rows, http_rows = load_rows(tmp_path / "local"), load_rows(tmp_path / "http")
    assert local_rows == http_rows
    local_report, http_report = read_report(tmp_path / "local"), read_report(tmp_path / "http")
    assert local_report["skipped"] == http_report["skipped"]
    assert local_report["rows_out"] == http_report["rows_out"] == len(local_rows)
    # Every conversation with tool calls is kept: each of its assistant turns is a row.
    calls = [
        turn for row in good for turn in row["messages"] if turn.get("tool_calls")
    ]  # fmt: skip
    with_calls = [r for r in http_rows if TOOL_CALL in r["input_ids"]]
    assert calls and len(with_calls) >= len(calls)
    assert sum(http_report["skipped"].values()) == len(rejected)
    # Arguments vLLM would turn into {} silently are our skip reason on both paths.
    assert http_report["skipped"]["tool call arguments are not valid JSON"] == 1
    assert http_report["skipped"]["tool call arguments are not a JSON object"] == 1
