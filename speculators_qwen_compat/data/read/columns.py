"""Finding the conversation in one row: which column holds it, or how flat columns map to one.

Why: upstream reads only ``conversations`` (docs/upstream.md, "Conversation column and
normalization"); real data uses other names, JSON text or flat columns (docs/formats.md). Pure
functions of one row and the options, so workers and doctor decide as the parent's peek did.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from speculators_qwen_compat.core.run_options import current_options

#: Column names that hold a conversation, tried in this order.
CONVERSATION_KEYS = ("conversations", "messages", "conversation")
#: Row-level system prompt columns read alongside a conversation (LLaMA-Factory, Anthropic API).
SYSTEM_KEYS = ("system",)
TURN_KEYS = ("role", "from")

#: Flat column names users' data sets use, for the suggestion in the "no conversation" error.
PROMPT_NAMES = ("instruction", "prompt", "question", "query", "problem", "input", "context")
RESPONSE_NAMES = ("output", "response", "completion", "answer", "solution", "chosen")
SYSTEM_NAMES = ("system", "system_prompt")


class NoConversation(ValueError):
    """The row holds no conversation; the message is the skip reason."""


@dataclass(frozen=True)
class ColumnOptions:
    """What the user told us about the columns (prepare_data's flags)."""

    conversations_key: str | None = None
    prompt: tuple[str, ...] = ()  # joined with a newline, the way LLaMA-Factory joins prompt+query
    response: str | None = None
    system: str | None = None

    def as_options(self) -> dict[str, Any]:
        """As the run's options hold them (core/run_options.py), for every map worker."""
        return {
            "conversations_key": self.conversations_key,
            "prompt_columns": self.prompt,
            "response_column": self.response,
            "system_column": self.system,
        }

    @classmethod
    def of_this_run(cls) -> ColumnOptions:
        options = current_options()
        return cls(
            options.conversations_key,
            options.prompt_columns,
            options.response_column,
            options.system_column,
        )

    @classmethod
    def from_flags(
        cls,
        conversations_key: str | None,
        prompt: str | None,
        response: str | None,
        system: str | None,
    ) -> ColumnOptions:
        parts = tuple(p.strip() for p in (prompt or "").split(",") if p.strip())
        if bool(parts) != bool(response):
            from speculators_qwen_compat.core.errors import CompatError

            raise CompatError("--prompt-column and --response-column go together; give both")
        return cls(conversations_key, parts, response, system)


def find_conversation(row: Mapping[str, Any], options: ColumnOptions) -> tuple[Any, str]:
    """``(turns, column)``: the row's conversation (a list, or JSON text of one) and the name of
    the column it came from (``"prompt->response"`` for a flat mapping)."""
    if options.conversations_key:
        name = options.conversations_key
        if row.get(name) is None:
            raise NoConversation(
                f"conversation column {name!r} is null" if name in row else f"no {name!r} column"
            )
        return row[name], name
    if options.prompt and options.prompt[0] in row:
        return flat_conversation(row, options), f"{'+'.join(options.prompt)}->{options.response}"
    for name in CONVERSATION_KEYS:
        if row.get(name) is not None:
            return row[name], name
    for name, value in row.items():
        if looks_like_turns(value):
            return value, name
    if any(name in row for name in CONVERSATION_KEYS):
        raise NoConversation("conversation is null")
    raise NoConversation("no conversation column (conversations, messages, conversation)")


def flat_conversation(row: Mapping[str, Any], options: ColumnOptions) -> list[dict[str, Any]]:
    """One user turn (the prompt columns joined by a newline) and one assistant turn."""
    prompt = "\n".join(str(row[c]) for c in options.prompt if row.get(c) not in (None, ""))
    response = row.get(options.response or "")
    if not prompt.strip():
        raise NoConversation(f"prompt column {options.prompt[0]!r} is empty")
    turns: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    if isinstance(response, str):
        turns.append({"role": "assistant", "content": response})
    elif response is not None:
        raise NoConversation(f"response column {options.response!r} is not text")
    return turns


def row_system(row: Mapping[str, Any], options: ColumnOptions) -> Any:
    """A row-level system prompt (``--system-column``, else a ``system`` column), or None."""
    names = (options.system,) if options.system else SYSTEM_KEYS
    for name in names:
        value = row.get(name)
        if value:
            return value
    return None


def looks_like_turns(value: Any) -> bool:
    """A list of turn mappings (``role`` or ``from``), or the JSON text of one."""
    if isinstance(value, str):
        text = value.lstrip()
        if not text.startswith("[") or ('"role"' not in text and '"from"' not in text):
            return False
        try:
            value = json.loads(text)
        except ValueError:
            return False
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(t, Mapping) for t in value)
        and any(k in value[0] for k in TURN_KEYS)
    )


def suggest_mapping(columns: list[str]) -> str:
    """The flags that would read flat instruction data with these columns, or ""."""
    lowered = {c.lower(): c for c in columns}
    prompt = [lowered[n] for n in PROMPT_NAMES if n in lowered]
    response = next((lowered[n] for n in RESPONSE_NAMES if n in lowered), None)
    if not prompt or not response:
        return ""
    # Alpaca's "input" and Dolly's "context" go after the instruction; a lone prompt column is it.
    main = [c for c in prompt if c.lower() not in ("input", "context")][:1]
    extra = [c for c in prompt if c.lower() in ("input", "context")][:1]
    flags = f"--prompt-column {','.join(main + extra or prompt[:1])} --response-column {response}"
    system = next((lowered[n] for n in SYSTEM_NAMES if n in lowered), None)
    return flags + (f" --system-column {system}" if system else "")


def no_conversation_message(where: str, columns: list[str], key: str | None) -> str:
    """The one-line error for a file (or data set) with no conversation in its first rows."""
    found = ", ".join(sorted(columns)) or "none"
    if key:
        return (
            f"{where}: no conversation column {key!r} (columns found: {found}); "
            "name the right one with --conversations-key"
        )
    mapping = suggest_mapping(columns)
    if mapping:
        return (
            f"{where}: no conversation column (columns found: {found}); this looks like flat "
            f"instruction data: pass {mapping}"
        )
    return (
        f"{where}: no conversation column (columns found: {found}); expected 'conversations' "
        "(ShareGPT), 'messages' (OpenAI) or 'conversation', or name the column with "
        "--conversations-key, or map flat columns with --prompt-column/--response-column"
    )
