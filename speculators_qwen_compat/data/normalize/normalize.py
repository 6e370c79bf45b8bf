"""Turning one row of training data into the conversation a chat template expects.

ShareGPT, OpenAI, Anthropic-style and mixed rows become OpenAI-shaped turns on every release
(docs/formats.md, "Formats read"; docs/upstream.md, "Conversation column and normalization"); a
row that cannot be turned raises ``BadConversation``, whose message is the counted reason.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from speculators_qwen_compat.core.run_options import current_options
from speculators_qwen_compat.data.normalize.media_forms import (
    READ_PARTS,
    TEXT_PARTS,
    MediaFormError,
    place_columns,
    upstream_part,
)
from speculators_qwen_compat.data.read.columns import (
    CONVERSATION_KEYS,
    ColumnOptions,
    NoConversation,
    find_conversation,
    row_system,
)

#: Role names seen in the wild, mapped to the four roles Qwen templates render.
ROLE_TABLE: dict[str, str] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "gpt": "assistant",
    "model": "assistant",
    "bot": "assistant",
    "chatgpt": "assistant",
    "function_call": "assistant",
    "tool": "tool",
    "function": "tool",
    "observation": "tool",
    "ipython": "tool",
    "tool_response": "tool",
    "function_response": "tool",
}

REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")
TOOLS_KEYS = ("tools", "functions")  # OpenAI tools; OpenAI's legacy functions
UNKNOWN_ROLE_CHOICES = ("release", "assistant", "drop", "skip")
_THINK = re.compile(r"^\s*<think>.*?</think>\s*", re.DOTALL)

__all__ = ["CONVERSATION_KEYS", "BadConversation", "Normalized", "normalize_row"]


class BadConversation(ValueError):
    """A row that cannot become a conversation; the message is the skip reason, ``detail``
    what the ledger's example adds to the row's source (a media path as resolved)."""

    data_problem = True  # counted as a skipped row, never as a bug (data/account/row_errors.py)
    detail = ""


@dataclass
class Normalized:
    """One row, normalised: the conversation, its tools, and what the run must count."""

    conversation: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    #: indices of assistant turns with weight 0: context, never supervised
    zero_weight_turns: list[int] = field(default_factory=list)
    column: str = ""
    #: one entry per counted event, e.g. "turns with role 'gpt-4o' treated as assistant, ..."
    notes: list[str] = field(default_factory=list)


@dataclass
class _State:
    #: What the installed release does with a role it does not know ("assistant" on 0.8+,
    #: "drop" before), as the conversations fix read it from upstream's shape; None: from the
    #: version.
    release_roles: str | None = None
    #: where the row was read (``file:line``): its relative media paths resolve from there
    source: str | None = None
    notes: list[str] = field(default_factory=list)
    zero_weight_turns: list[int] = field(default_factory=list)
    calls_without_arguments: list[str] = field(default_factory=list)


@lru_cache(maxsize=1)
def _release() -> str:
    try:
        from importlib.metadata import version

        return ".".join(version("speculators").split(".")[:2])
    except Exception:  # not installed: the newest behaviour
        return ""


def unknown_role_policy(release_roles: str | None = None) -> str:
    """ "assistant", "drop" or "skip": ``--unknown-roles``, else the installed release's own
    (``release_roles`` when the caller read it from upstream's shape, else by version)."""
    chosen = current_options().unknown_roles
    if chosen in ("assistant", "drop", "skip"):
        return chosen
    if release_roles:
        return release_roles
    release = _release()
    try:
        old = bool(release) and tuple(int(x) for x in release.split(".")) < (0, 8)
    except ValueError:
        old = False
    return "drop" if old else "assistant"


def checked_unknown_roles(value: str) -> str:
    """``--unknown-roles`` as the run's options take it; a value outside the choices is fatal."""
    if value not in UNKNOWN_ROLE_CHOICES:
        from speculators_qwen_compat.core.errors import CompatError

        raise CompatError(
            f"--unknown-roles {value}: choose one of {', '.join(UNKNOWN_ROLE_CHOICES)}"
        )
    return value


def _unknown_role_note(role: str, policy: str) -> str:
    how = "treated as assistant" if policy == "assistant" else "dropped"
    if current_options().unknown_roles == policy:
        return f"turns with role {role!r} {how} (--unknown-roles {policy})"
    return f"turns with role {role!r} {how}, as speculators {_release() or 'upstream'} does"


def pick_conversation(row: Mapping[str, Any], key: str | None = None) -> Any:
    """The conversation of a row: the named column, else the first one found (columns.py)."""
    try:
        return find_conversation(row, ColumnOptions(conversations_key=key))[0]
    except NoConversation as exc:
        raise BadConversation(str(exc)) from None


def normalize_row(
    row: Mapping[str, Any],
    options: ColumnOptions | None = None,
    release_roles: str | None = None,
    source: str | None = None,
) -> Normalized:
    """One row (a parsed JSON object) -> its normalised conversation, tools and notes.
    ``release_roles``: what the installed release does with unknown roles (unknown_role_policy);
    ``source``: where it was read (``file:line``), for its relative media paths."""
    options = options or ColumnOptions()
    try:
        conv, column = find_conversation(row, options)
    except NoConversation as exc:
        raise BadConversation(str(exc)) from None
    state = _State(release_roles, source)
    turns = _normalize(conv, state)
    system = row_system(row, options)
    if system and not any(t["role"] == "system" for t in turns):
        text = _system_text(system)
        if text:
            turns.insert(0, {"role": "system", "content": text})
            state.zero_weight_turns = [i + 1 for i in state.zero_weight_turns]
    try:  # after the system column is a turn: a placeholder there is counted too
        turns = place_columns(turns, row, source)  # LLaVA / LLaMA-Factory media columns
    except MediaFormError as exc:
        raise _bad_media(exc) from None
    tools = _tools_of(row)
    _check_calls_without_arguments(state.calls_without_arguments, tools)
    assistant = [i for i, t in enumerate(turns) if t["role"] == "assistant"]
    if assistant and all(i in state.zero_weight_turns for i in assistant):
        raise BadConversation("nothing to supervise: every assistant turn has weight 0")
    return Normalized(turns, tools, state.zero_weight_turns, column, state.notes)


def normalize_conversation(
    conv: Any, turn_dropout: bool = False, release_roles: str | None = None
) -> list[dict[str, Any]]:
    """Normalize one conversation; raises BadConversation with the reason when it cannot."""
    turns = _normalize(conv, _State(release_roles))
    if turn_dropout:
        turns = _drop_trailing_turns(turns)
    return turns


def cut_turns(turns: list[dict[str, Any]], turn_dropout: bool = False) -> list[dict[str, Any]]:
    """``normalize_conversation`` of turns it already gave: normalising is idempotent, so only
    the turn dropout is left to do (tests/test_data_units.py checks the idempotence)."""
    return _drop_trailing_turns(turns) if turn_dropout else list(turns)


def _normalize(conv: Any, state: _State) -> list[dict[str, Any]]:
    if isinstance(conv, str):
        conv = _json_value(conv, "conversation is a string that is not JSON")
    if not isinstance(conv, list) or not conv:
        raise BadConversation("conversation is empty or not a list")
    turns: list[dict[str, Any]] = []
    for turn in conv:
        for out, weightless in _normalize_turn(turn, state):
            if weightless and out["role"] == "assistant":
                state.zero_weight_turns.append(len(turns))
            turns.append(out)
    if not turns:
        raise BadConversation("conversation is empty or not a list")
    return turns


def _normalize_turn(turn: Any, state: _State) -> list[tuple[dict[str, Any], bool]]:
    """One input turn -> the turns it becomes, each with "is context" (weight 0)."""
    if not isinstance(turn, Mapping):
        raise BadConversation(f"turn is not a mapping ({type(turn).__name__})")
    raw_role = turn.get("from")
    if raw_role is None:
        raw_role = turn.get("role")
    if raw_role is None:
        raise BadConversation("turn without a role")
    key = str(raw_role).strip().lower()
    role = ROLE_TABLE.get(key)
    if role is None:
        policy = unknown_role_policy(state.release_roles)
        if policy == "skip":
            raise BadConversation(f"unknown role {str(raw_role)[:40]!r}")
        state.notes.append(_unknown_role_note(str(raw_role)[:40], policy))
        if policy == "drop":
            return []
        role = "assistant"

    content = turn.get("value")
    if content is None:
        content = turn.get("content")
    context = _weight_is_zero(turn)
    before: list[tuple[dict[str, Any], bool]] = []
    blocks = _blocks(content)
    reasoning = next((turn[k] for k in REASONING_KEYS if turn.get(k)), None)
    calls: Any = turn.get("tool_calls") or None
    if blocks is not None:
        content, block_reasoning, block_calls, results = blocks
        reasoning = reasoning or block_reasoning
        calls = (calls or []) + block_calls if block_calls else calls
        before = [(result, False) for result in results]
        if results and role == "user" and not _has_text(content):
            return before  # a user turn that only carried tool results
    if key == "function_call":  # LLaMA-Factory / ShareGPT function calling: the call is the value
        calls = _as_openai_calls(
            _json_value(content, "function_call turn is not JSON")
            if isinstance(content, str)
            else content
        )
        content = ""
    out: dict[str, Any] = {"role": role, "content": _normalize_content(content, state.source)}
    if key != "function_call" and turn.get("function_call") and role == "assistant":
        # OpenAI's legacy single call
        calls = (calls or []) + _as_openai_calls(turn["function_call"])
    if calls:
        out["tool_calls"] = _normalize_tool_calls(calls, state)
    for name in ("tool_call_id", "name"):
        if turn.get(name):
            out[name] = turn[name]
    if role == "tool" and not out.get("tool_call_id") and turn.get("tool_use_id"):
        out["tool_call_id"] = turn["tool_use_id"]

    if reasoning is not None and role == "assistant":
        out["reasoning_content"] = reasoning
        out["thinking"] = reasoning
        text = out["content"]
        if isinstance(text, str) and "</think>" in text and _THINK.match(text):
            out["content"] = _THINK.sub("", out["content"], count=1)  # never rendered twice
    return [*before, (out, context)]


def _weight_is_zero(turn: Mapping[str, Any]) -> bool:
    weight = turn.get("weight")
    if turn.get("train") is False:
        return True
    if weight is None:
        return False
    try:
        return float(weight) == 0.0
    except (TypeError, ValueError):
        raise BadConversation(f"turn weight {str(weight)[:20]!r} is not a number") from None


def _has_text(content: Any) -> bool:
    if isinstance(content, list):
        return any(_has_text(part) for part in content)
    if isinstance(content, Mapping):
        return bool(str(content.get("text") or "").strip()) or content.get("type") not in TEXT_PARTS
    return bool(str(content or "").strip())


ANTHROPIC_BLOCKS = ("tool_use", "tool_result", "thinking", "redacted_thinking")


def _blocks(content: Any) -> tuple[Any, str | None, list[dict], list[dict]] | None:
    """Anthropic-style content blocks -> (the other parts, or "" when none are left; reasoning;
    tool calls; tool turns), or None when the content has none of those blocks."""
    if not isinstance(content, list) or not any(
        isinstance(b, Mapping) and b.get("type") in ANTHROPIC_BLOCKS for b in content
    ):
        return None
    parts: list[Any] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "thinking":
            reasoning.append(str(block.get("thinking") or ""))
        elif kind == "redacted_thinking":
            continue
        elif kind == "tool_use":
            calls.append(
                {
                    "id": block.get("id"),
                    "type": "function",
                    "function": {
                        "name": block.get("name"),
                        "arguments": _dumps(block.get("input", {})),
                    },
                }
            )
        elif kind == "tool_result":
            result = block.get("content")
            if isinstance(result, list):
                result = "\n".join(
                    str(p.get("text", "")) if isinstance(p, Mapping) else str(p) for p in result
                )
            tool: dict[str, Any] = {"role": "tool", "content": "" if result is None else result}
            if block.get("tool_use_id"):
                tool["tool_call_id"] = block["tool_use_id"]
            results.append(tool)
        else:
            parts.append(block)
    return parts or "", "\n".join(reasoning) or None, calls, results


def _as_openai_calls(value: Any) -> list[dict[str, Any]]:
    """A LLaMA-Factory/legacy call (``{"name", "arguments"}``, or a list of them) in the
    OpenAI shape; object arguments are re-serialised as JSON text."""
    items = value if isinstance(value, list) else [value]
    calls = []
    for item in items:
        if not isinstance(item, Mapping):
            raise BadConversation("tool call is not a mapping")
        function = dict(item)
        if "arguments" in function and not isinstance(function["arguments"], str):
            function["arguments"] = _dumps(function["arguments"])
        calls.append({"type": "function", "function": function})
    return calls


def _dumps(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _system_text(system: Any) -> Any:
    """A top-level system prompt: text, or Anthropic's list of text blocks."""
    if isinstance(system, list):
        return "\n".join(
            str(b.get("text", "")) if isinstance(b, Mapping) else str(b) for b in system
        )
    return system if isinstance(system, str) else None


def _tools_of(row: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The row's tool definitions in the OpenAI shape, from ``tools`` and legacy ``functions``."""
    tools: list[dict[str, Any]] = []
    for key in TOOLS_KEYS:
        value = row.get(key)
        if value in (None, "", []):
            continue
        if isinstance(value, str):
            value = _json_value(value, f"{key} column is not valid JSON")
        if isinstance(value, Mapping):
            value = [value]
        if not isinstance(value, list):
            raise BadConversation(f"{key} column is not a list of tool definitions")
        tools.extend(_tool(item, key) for item in value)
    return tools or None


def _tool(item: Any, key: str) -> dict[str, Any]:
    if isinstance(item, str):
        item = _json_value(item, f"a {key} entry is not valid JSON")
    if not isinstance(item, Mapping):
        raise BadConversation(f"a {key} entry is not a tool definition")
    item = {k: v for k, v in item.items() if v is not None}
    if isinstance(item.get("function"), Mapping):
        return {"type": item.get("type") or "function", "function": dict(item["function"])}
    if not item.get("name"):
        raise BadConversation(f"a {key} entry has no name")
    if "input_schema" in item:  # Anthropic's tool shape
        function = {k: v for k, v in item.items() if k not in ("input_schema", "type")}
        function["parameters"] = item["input_schema"]
        return {"type": "function", "function": function}
    return {"type": "function", "function": {k: v for k, v in item.items() if k != "type"}}


def _check_calls_without_arguments(names: list[str], tools: list[dict[str, Any]] | None) -> None:
    """A call without arguments is fine only for a function whose schema takes none."""
    schemas = {t["function"].get("name"): t["function"] for t in tools or []}
    for name in names:
        schema = schemas.get(name)
        params = (schema or {}).get("parameters") or {}
        if schema is None or params.get("properties") or params.get("required"):
            raise BadConversation(
                f"tool call {name!r} without arguments"
                + ("" if schema else " (no tool definition says it takes none)")
            )


def _normalize_content(content: Any, source: str | None = None) -> Any:
    if content is None:
        return ""
    if isinstance(content, list):
        return [_normalize_part(part, source) for part in content]
    if not isinstance(content, str):
        # Strict templates reject these ("Unexpected content type."), and 0.8+ fail earlier
        # with a bare TypeError: one reason on every release.
        raise BadConversation(
            f"content is neither text nor a list of parts ({type(content).__name__})"
        )
    return content


def _normalize_part(part: Any, source: str | None = None) -> Any:
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if isinstance(part, Mapping):
        # Arrow-unified parts carry every key of every part type, mostly None: drop those.
        part = {k: v for k, v in part.items() if v is not None}
        # OpenAI Responses' input_text/output_text parts are text parts
        if "text" in part and part.get("type", "text") in TEXT_PARTS:
            return {"type": "text", "text": part["text"]}
        try:  # every media form, inline images written once (data/normalize/media_forms.py)
            read = upstream_part(part, source)
        except MediaFormError as exc:
            raise _bad_media(exc) from None
        kind = read.get("type") if isinstance(read, Mapping) else None
        if isinstance(kind, str) and kind not in READ_PARTS:
            raise BadConversation(
                f"a content part of type {kind!r}: only text, image and video parts are read"
            )
        return read
    return part


def _bad_media(exc: MediaFormError) -> BadConversation:
    bad = BadConversation(str(exc))
    bad.detail = exc.detail  # the path as resolved, for the ledger's example
    return bad


def _normalize_tool_calls(calls: Any, state: _State | None = None) -> list[Any]:
    """Tool calls as the data gives them when they are in the OpenAI shape (upstream's contract:
    they pass through unchanged); other shapes (a JSON string, one mapping, ``{"name",
    "arguments"}`` items, ``parameters`` for arguments) become OpenAI-shaped calls.

    They are checked, not converted: a call without a name, or ``arguments`` that are not a JSON
    object (invalid JSON, or JSON that is not an object), is a skip reason on every path, where
    vLLM would render such arguments as ``{}`` silently (docs/formats.md, "vLLM parity").
    """
    given = calls
    if isinstance(calls, str):
        calls = _json_value(calls, "tool_calls is a string that is not JSON")
    if isinstance(calls, Mapping):
        calls = [calls]
    if not isinstance(calls, list):
        raise BadConversation("tool_calls is not a list")
    reshape = calls is not given
    for call in calls:
        if not isinstance(call, Mapping):
            raise BadConversation("tool call is not a mapping")
        function = call.get("function") if isinstance(call.get("function"), Mapping) else call
        name = function.get("name")
        if not name:
            raise BadConversation("tool call without a name")
        if function is call or ("arguments" not in function and "parameters" in function):
            reshape = True
        arguments = function.get("arguments")
        if arguments is None and "parameters" not in function and state is not None:
            state.calls_without_arguments.append(str(name))
        if arguments is None:
            arguments = function.get("parameters")
        if isinstance(arguments, str):
            arguments = _json_value(arguments, "tool call arguments are not valid JSON")
        if arguments is not None and not isinstance(arguments, Mapping):
            raise BadConversation("tool call arguments are not a JSON object")
    return [_openai_call(call) for call in calls] if reshape else calls


def _openai_call(call: Mapping[str, Any]) -> dict[str, Any]:
    """One call in OpenAI's shape; object arguments are re-serialised as JSON text."""
    source = call.get("function") if isinstance(call.get("function"), Mapping) else call
    function: dict[str, Any] = {"name": source["name"]}
    arguments = source.get("arguments", source.get("parameters"))
    if arguments is not None:
        function["arguments"] = _dumps(arguments)
    entry: dict[str, Any] = {"type": "function", "function": function}
    if call.get("id"):
        entry["id"] = call["id"]
    return entry


def _json_value(text: str, reason: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise BadConversation(reason) from None


def _drop_trailing_turns(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """speculators <= 0.6's turn dropout: keep a random first N turns, cutting only after an
    assistant turn."""
    keep = random.randint(1, len(turns))
    for index, turn in enumerate(turns):
        if index + 1 >= keep and turn["role"] == "assistant":
            return turns[: index + 1]
    return turns
