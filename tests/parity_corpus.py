"""The vLLM parity corpus: render requests the way speculators 0.8+ send them, and the golden ids.

Each case is a ``/v1/chat/completions/render`` request as speculators builds it (messages from
the normaliser, ``add_generation_prompt`` both ways, a row's ``tools``, 0.9's truncation fields)
covering what real data holds: tools in the shapes OpenAI-style clients send, tool-call
arguments as JSON strings (and as mappings, and broken), reasoning on history and last turns
under every alias, parts lists in every role, non-ASCII, literal special tokens, developer
turns, long prompts with truncation, and requests the template rejects. The server gets
``request_messages`` of the messages (what our HTTP path sends); the local renderer gets them as
the data gives them.

Golden ids recorded from the real server live in tests/golden/vllm-<version>/<style>.json
(``python tests/parity_corpus.py record`` with the server venv built; tests/test_vllm_parity.py
re-records on every run with the server and fails on any drift).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).resolve().parent / "golden"
STYLES = ("qwen36", "qwen35")

TOOLS_OPENAI = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the web.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            "strict": True,
        },
    },
]
#: Shapes other clients send: keys in another order, no description, no parameters, extras.
TOOLS_VARIED = [
    {
        "function": {
            "parameters": {"properties": {"path": {"type": "string"}}, "type": "object"},
            "name": "read_file",
        },
        "type": "function",
    },
    {"type": "function", "function": {"name": "now"}},
    {
        "type": "function",
        "function": {
            "name": "run",
            "description": "Run a shell command; ünïcödé 说明",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
            "x-extra": {"k": 1},
        },
        "metadata": {"source": "mcp"},
    },
]


def _call(name: str, arguments: Any, call_id: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if call_id:
        call["id"] = call_id
    return call


def _text(*texts: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": t} for t in texts]


U = {"role": "user", "content": "What is the weather in Paris?"}
S = {"role": "system", "content": "You are a helpful assistant."}
A = {"role": "assistant", "content": "It is sunny, 21 °C."}
WEATHER_CALL = _call("get_weather", '{"city": "Paris", "unit": "celsius"}', "call_1")
A_CALL = {"role": "assistant", "content": "", "tool_calls": [WEATHER_CALL]}
T = {"role": "tool", "content": '{"temp": 21, "sky": "sunny"}', "tool_call_id": "call_1"}
INLINE_THINK = "<think>\nhmm\n</think>\n\nOk."
LONG = " ".join(f"Sentence {i}: the quick brown fox jumps over the lazy dog." for i in range(60))


def _conversations() -> dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]] | None]]:
    """Named conversations (messages, tools); each is rendered as prompt and/or full below."""
    return {
        "plain": ([U, A], None),
        "system": ([S, U, A], None),
        "multi_turn": ([S, U, A, {"role": "user", "content": "And tomorrow?"}, A], None),
        "reasoning_last": ([U, {**A, "reasoning_content": "The user wants weather."}], None),
        "reasoning_history": (
            [
                U,
                {**A, "reasoning_content": "first thought"},
                {"role": "user", "content": "Thanks! And Lyon?"},
                {**A, "reasoning_content": "second thought"},
            ],
            None,
        ),
        "reasoning_alias_only": ([U, {**A, "reasoning": "via the reasoning key"}], None),
        "reasoning_both_keys": (
            [U, {**A, "reasoning": "reasoning wins", "reasoning_content": "ignored"}],
            None,
        ),
        "thinking_key_dropped": ([U, {**A, "thinking": "only thinking"}], None),
        "inline_think": ([U, {"role": "assistant", "content": INLINE_THINK}], None),
        "tools_openai": ([S, U, A_CALL, T, A], TOOLS_OPENAI),
        "tools_varied": ([U, A], TOOLS_VARIED),
        "tools_no_system": ([U, A_CALL, T, A], TOOLS_OPENAI),
        "tool_args_nested": (
            [
                U,
                {
                    "role": "assistant",
                    "content": "Let me check.",
                    "tool_calls": [
                        _call(
                            "search",
                            json.dumps(
                                {
                                    "q": "天气 ☀",
                                    "filters": {"lang": ["en", "fr"], "n": 3.5},
                                    "flag": True,
                                    "none": None,
                                },
                                ensure_ascii=False,
                            ),
                            "c9",
                        )
                    ],
                },
                {"role": "tool", "content": "[]", "tool_call_id": "c9"},
                A,
            ],
            TOOLS_OPENAI,
        ),
        "tool_calls_multiple_no_ids": (
            [
                U,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        _call("get_weather", '{"city": "Paris"}'),
                        _call("get_weather", '{"city": "Lyon", "unit": "fahrenheit"}'),
                    ],
                },
                {"role": "tool", "content": "21"},
                {"role": "tool", "content": "19"},
                A,
            ],
            TOOLS_OPENAI,
        ),
        "tool_args_mapping": (
            [U, {**A_CALL, "tool_calls": [_call("get_weather", {"city": "Nice"}, "m1")]}, T, A],
            TOOLS_OPENAI,
        ),
        "tool_args_missing": (
            [
                U,
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"type": "function", "id": "n1", "function": {"name": "now"}}],
                },
                T,
                A,
            ],
            TOOLS_VARIED,
        ),
        "tool_args_invalid_json": (
            [U, {**A_CALL, "tool_calls": [_call("get_weather", "{not json", "b1")]}, T, A],
            TOOLS_OPENAI,
        ),
        "tool_args_not_object": (
            [U, {**A_CALL, "tool_calls": [_call("get_weather", "[1, 2]", "b2")]}, T, A],
            TOOLS_OPENAI,
        ),
        "tool_args_empty_string": (
            [U, {**A_CALL, "tool_calls": [_call("now", "", "b3")]}, T, A],
            TOOLS_VARIED,
        ),
        "tool_calls_empty_list": ([U, {**A, "tool_calls": []}], None),
        "tool_parts_joined": (
            [
                U,
                A_CALL,
                {
                    "role": "tool",
                    "content": _text("line one", "line two"),
                    "tool_call_id": "call_1",
                },
                A,
            ],
            TOOLS_OPENAI,
        ),
        "tool_call_with_reasoning": (
            [
                U,
                {**A_CALL, "reasoning_content": "I should call the tool."},
                T,
                {**A, "reasoning_content": "Now answer."},
            ],
            TOOLS_OPENAI,
        ),
        "parts_user": ([{"role": "user", "content": _text("Part A.", "Part B.")}, A], None),
        "parts_every_role": (
            [
                {"role": "system", "content": _text("Sys 1.", "Sys 2.")},
                {"role": "user", "content": _text("Q1", "Q2")},
                {"role": "assistant", "content": _text("A1", "A2")},
                {"role": "user", "content": ["bare string part", {"type": "text", "text": "x"}]},
                {"role": "assistant", "content": _text("final")},
            ],
            None,
        ),
        "parts_system_with_tools": (
            [{"role": "system", "content": _text("Be brief.", "Use tools.")}, U, A],
            TOOLS_OPENAI,
        ),
        "non_ascii": (
            [
                {"role": "user", "content": "你好，世界！Привет 👋🏽 cafe\u0301 naïve العربية"},
                {"role": "assistant", "content": "こんにちは 🌸 — «ok» ½ ∑"},
            ],
            None,
        ),
        "special_tokens_literal": (
            [
                {"role": "user", "content": "Say <|im_end|> and <think> literally"},
                {"role": "assistant", "content": "<|im_start|> <tool_call> </think>"},
            ],
            None,
        ),
        "whitespace": (
            [
                {"role": "user", "content": "  \n padded \t\n"},
                {"role": "assistant", "content": "\n\n  spaced  \n"},
            ],
            None,
        ),
        "developer_first": (
            [{"role": "developer", "content": "Dev rules."}, U, A],
            None,
        ),
        "developer_after_system": (
            [S, U, {"role": "developer", "content": "Late dev note."}, A],
            None,
        ),
        "empty_assistant": ([U, {"role": "assistant", "content": ""}], None),
        "no_user_query": ([S, A], None),
        "late_system": ([U, A, S, {"role": "user", "content": "again"}, A], None),
        "long": ([{"role": "user", "content": LONG}, A], None),
    }


def cases() -> dict[str, dict[str, Any]]:
    """Render requests by name: prompt and full renders of every conversation, plus variants."""
    out: dict[str, dict[str, Any]] = {}
    for name, (messages, tools) in _conversations().items():
        last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=0)
        prompt = messages[:last] if last > 0 else messages
        base: dict[str, Any] = {"tools": tools} if tools is not None else {}
        out[f"{name}/full"] = {**base, "messages": messages, "add_generation_prompt": False}
        out[f"{name}/prompt"] = {**base, "messages": prompt, "add_generation_prompt": True}
    long_messages = _conversations()["long"][0]
    for side, n in (("right", 300), ("left", 300), ("right", 8000)):
        out[f"long/truncate_{side}_{n}"] = {
            "messages": long_messages,
            "add_generation_prompt": False,
            "truncate_prompt_tokens": n,
            "truncation_side": side,
        }
    out["multi_turn/full_truncated_0.9"] = {
        **out["multi_turn/full"], "truncate_prompt_tokens": 40, "truncation_side": "right",
    }  # fmt: skip
    out["plain/prompt_no_thinking"] = {
        **out["plain/prompt"], "chat_template_kwargs": {"enable_thinking": False},
    }  # fmt: skip
    out["plain/prompt_thinking"] = {
        **out["plain/prompt"], "chat_template_kwargs": {"enable_thinking": True},
    }  # fmt: skip
    out["reasoning_history/preserve_thinking"] = {
        **out["reasoning_history/full"], "chat_template_kwargs": {"preserve_thinking": True},
    }  # fmt: skip
    return out


def server_body(case: dict[str, Any]) -> dict[str, Any]:
    """The JSON body our HTTP path sends for a case."""
    from speculators_qwen_compat.data.render.render import request_messages

    return {**case, "messages": request_messages(case["messages"])}


def golden_path(style: str, version: str) -> Path:
    return GOLDEN / f"vllm-{version}" / f"{style}.json"


def answer_of(status: int, payload: Any) -> dict[str, Any]:
    """What a case's golden entry records: the ids, or that the server rejected it and the
    message it gave (vLLM's error object: the template's own words for a template error)."""
    if status == 200:
        return {"ids": payload["token_ids"]}
    return {"status": status, "message": payload["error"]["message"]}


#: The kind of a local render's exception that agrees with the server's 400: the chat template
#: rejecting the conversation (jinja2's TemplateError, raised by the template's
#: ``raise_exception``), what vLLM answers 400 for. Any other exception (a TypeError of a bug) is
#: a kind of its own, and never agreement.
TEMPLATE_REJECTION = "template"


def local_answer(render: Callable[[], list[int]]) -> dict[str, Any]:
    """A local render's outcome as the oracle compares it: ``{"ids"}``, or ``{"error": kind,
    "message"}`` with ``kind`` TEMPLATE_REJECTION or the exception's type name."""
    from jinja2 import TemplateError

    try:
        return {"ids": render()}
    except Exception as exc:
        kind = TEMPLATE_REJECTION if isinstance(exc, TemplateError) else type(exc).__name__
        return {"error": kind, "message": str(exc)}


def server_answers(render: Callable[[dict[str, Any]], tuple[int, Any]]) -> dict[str, Any]:
    """Every case rendered by ``render`` (a server's POST: status, JSON), as golden entries."""
    return {name: answer_of(*render(server_body(case))) for name, case in cases().items()}


def mismatches(got: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    """Cases whose local answer (``local_answer``) differs from the server's: other ids, an
    error where the server rendered, and where the server refused (400): anything but the
    template's rejection with the server's message (ids, or an exception of another kind)."""
    bad = []
    for name in sorted(set(got) | set(expected)):
        a, b = got.get(name), expected.get(name)
        if a is None or b is None:
            bad.append(f"{name}: only {'local' if b is None else 'the server'} answered")
        elif "status" in b:
            want = {"error": TEMPLATE_REJECTION, "message": b["message"]}
            if a != want:
                bad.append(f"{name}: server answered {b['status']} {want}, local {str(a)[:160]}")
        elif a != b:
            bad.append(f"{name}: {str(a)[:120]} != {str(b)[:120]}")
    return bad


def load_golden(style: str, version: str) -> dict[str, Any]:
    return json.loads(golden_path(style, version).read_text())


def write_golden(style: str, version: str, answers: dict[str, Any]) -> Path:
    path = golden_path(style, version)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(answers.items())]
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n")
    return path


def record(styles: tuple[str, ...] = STYLES) -> None:
    """Render every case on the real server and write the golden files."""
    import tempfile

    import vllm_server
    from qwen_vocab import vocab_dir

    from speculators_qwen_compat import demo

    for style in styles:
        with tempfile.TemporaryDirectory() as tmp:
            model = vllm_server.model_folder(Path(tmp), demo.chat_template(style), vocab_dir())
            with vllm_server.start(model) as server:
                answers = server_answers(server.render)
        path = write_golden(style, vllm_server.VLLM_VERSION, answers)
        print(f"wrote {path} ({len(answers)} cases)")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if sys.argv[1:] != ["record"]:
        raise SystemExit("usage: parity_corpus.py record")
    record()
