"""Turning one row of training data into the conversation a chat template expects.

Rows come as ShareGPT (``from``/``value``) or OpenAI (``role``/``content``) turns, or a mix when
Arrow unified a file holding both (absent keys then read as None). The result is a list of turns
with ``role`` in {system, user, assistant, tool}, ``content`` as given (strings, or parts lists
with text parts in ``{"type": "text", "text": ...}`` form), reasoning under both
``reasoning_content`` (what Qwen templates read) and ``thinking`` (what speculators <= 0.5 keeps),
and tool-call arguments as mappings (Qwen3.6 renders them with ``|items``).

A row that cannot be turned into such a conversation raises ``BadConversation`` whose message is
the reason counted in the skip report.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

#: Role names seen in the wild, mapped to the four roles Qwen templates render. Anything else
#: is a skipped conversation with its own reason, never silently supervised text.
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
CONVERSATION_KEYS = ("conversations", "messages")


class BadConversation(ValueError):
    """A row that cannot become a conversation; the message is the skip reason."""


def pick_conversation(row: Mapping[str, Any], key: str | None = None) -> Any:
    """The conversation of a row: the named column, else ``conversations``, else ``messages``."""
    names = (key,) if key else CONVERSATION_KEYS
    for name in names:
        value = row.get(name)
        if value is not None:
            return value
    if any(name in row for name in names):
        raise BadConversation("conversation is null")
    raise BadConversation(
        f"no {key!r} column" if key else "no 'conversations' or 'messages' column"
    )


def normalize_conversation(conv: Any, turn_dropout: bool = False) -> list[dict[str, Any]]:
    """Normalize one conversation; raises BadConversation with the reason when it cannot."""
    if isinstance(conv, str):
        conv = _json_value(conv, "conversation is a string that is not JSON")
    if not isinstance(conv, list) or not conv:
        raise BadConversation("conversation is empty or not a list")
    turns = [_normalize_turn(turn, index) for index, turn in enumerate(conv)]
    if turn_dropout:
        turns = _drop_trailing_turns(turns)
    return turns


def _normalize_turn(turn: Any, index: int) -> dict[str, Any]:
    if not isinstance(turn, Mapping):
        raise BadConversation(f"turn is not a mapping ({type(turn).__name__})")
    raw_role = turn.get("from")
    if raw_role is None:
        raw_role = turn.get("role")
    if raw_role is None:
        raise BadConversation("turn without a role")
    role = ROLE_TABLE.get(str(raw_role).strip().lower())
    if role is None:
        raise BadConversation(f"unknown role {str(raw_role)[:40]!r}")

    content = turn.get("value")
    if content is None:
        content = turn.get("content")
    out: dict[str, Any] = {"role": role, "content": _normalize_content(content)}

    if raw_role == "function_call":  # ShareGPT function-calling sets: the call is the value
        out["content"] = ""
        out["tool_calls"] = _normalize_tool_calls(content)
    elif turn.get("tool_calls"):
        out["tool_calls"] = _normalize_tool_calls(turn["tool_calls"])
    for key in ("tool_call_id", "name"):
        if turn.get(key) and role in ("tool", "assistant"):
            out[key] = turn[key]

    reasoning = next((turn[k] for k in REASONING_KEYS if turn.get(k)), None)
    if reasoning is not None and role == "assistant":
        out["reasoning_content"] = reasoning
        out["thinking"] = reasoning
    return out


def _normalize_content(content: Any) -> Any:
    if content is None:
        return ""
    if isinstance(content, list):
        return [_normalize_part(part) for part in content]
    if not isinstance(content, str):
        # Strict templates reject these ("Unexpected content type."), and 0.8+ fail earlier
        # with a bare TypeError: one reason on every release.
        raise BadConversation(
            f"content is neither text nor a list of parts ({type(content).__name__})"
        )
    return content


def _normalize_part(part: Any) -> Any:
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if isinstance(part, Mapping):
        # Arrow-unified parts carry every key of every part type, mostly None: drop those.
        part = {k: v for k, v in part.items() if v is not None}
        if "text" in part and part.get("type", "text") == "text":
            return {"type": "text", "text": part["text"]}
        if _inline_data(part):
            # Copying image bytes into the training set is what speculators 0.8+ refuse too.
            raise BadConversation("inline (base64) media in content; give file paths or URLs")
    return part


def _inline_data(part: Mapping[str, Any]) -> bool:
    if "base64" in part:
        return True
    for value in part.values():
        if isinstance(value, Mapping):
            value = value.get("url")
        if isinstance(value, str) and value.startswith("data:"):
            return True
    return False


def _normalize_tool_calls(calls: Any) -> list[dict[str, Any]]:
    if isinstance(calls, str):
        calls = _json_value(calls, "tool_calls is a string that is not JSON")
    if isinstance(calls, Mapping):
        calls = [calls]
    if not isinstance(calls, list):
        raise BadConversation("tool_calls is not a list")
    normalized = []
    for call in calls:
        if not isinstance(call, Mapping):
            raise BadConversation("tool call is not a mapping")
        function = call.get("function") if isinstance(call.get("function"), Mapping) else call
        name = function.get("name")
        if not name:
            raise BadConversation("tool call without a name")
        arguments = function.get("arguments")
        if arguments is None:
            arguments = function.get("parameters", {})
        if isinstance(arguments, str):
            arguments = _json_value(arguments, "tool call arguments are not valid JSON")
        if not isinstance(arguments, Mapping):
            raise BadConversation("tool call arguments are not a JSON object")
        entry: dict[str, Any] = {
            "type": "function",
            "function": {"name": name, "arguments": dict(arguments)},
        }
        if call.get("id"):
            entry["id"] = call["id"]
        normalized.append(entry)
    return normalized


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
