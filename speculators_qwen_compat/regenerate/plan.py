"""What regenerate-responses will send for one conversation, and the template's words on it.

Why: upstream keeps only system and user turns and splices results back by position
(docs/upstream.md, "Regenerate responses"). A row becomes a ``Plan`` through prepare_data's
normaliser; ``Plan.check`` renders a refused first prompt: the data's refusal or the server's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from speculators_qwen_compat.core.errors import reason_of
from speculators_qwen_compat.data.account.row_errors import is_data_problem
from speculators_qwen_compat.data.normalize import media_forms
from speculators_qwen_compat.data.normalize.normalize import BadConversation, normalize_row
from speculators_qwen_compat.data.read.columns import (
    ColumnOptions,
    NoConversation,
    find_conversation,
)

NO_USER_TURN = "no user turn"
_TOOL_RESPONSE = re.compile(r"<tool_response>\s*(.*?)\s*</tool_response>", re.DOTALL)
#: a reply's call whose arguments are not a JSON object: it is never sent (replaced)
_NEUTRAL_ARGUMENTS = "{}"

ResultNames = Callable[[Any], list[str]]


@dataclass
class CachedResult:
    """A tool result from the data and the tool it answers (None: nothing names it)."""

    name: str | None
    content: Any


@dataclass
class Step:
    """One reply to regenerate: what is appended to the prompt before it, and the results the
    data holds for the calls the target may make in it."""

    lead: list[dict[str, Any]]
    results: list[CachedResult] = field(default_factory=list)


class Plan(list):
    """A conversation's steps (a list, so it travels in upstream's ``turns`` slot), with the
    template check that may run (``pending``: the tokenizer and the tools; ``check``)."""

    notes: list[str]
    pending: tuple[Any, Any] | None

    def __init__(self, steps: list[Step]) -> None:
        super().__init__(steps)
        self.notes = []
        self.pending = None

    def check(self) -> str | None:
        """The template's words when it refuses the first prompt (rendered once, as text: an
        image part is the template's placeholder, never read here), else None."""
        if self.pending is None or not self:
            return None
        tokenizer, tools = self.pending
        self.pending = None
        outcome = _render(tokenizer, list(self[0].lead), tools)
        return reason_of(outcome) if isinstance(outcome, BaseException) else None


def plan_row(
    row: Mapping[str, Any],
    prompt_field: str | None = None,
    tokenizer: Any = None,
    result_names: ResultNames | None = None,
) -> tuple[Plan, Any]:
    """(the steps, the tools in the OpenAI shape or None) of one row; with a tokenizer the
    template check is left pending on the plan (``Plan.check``, run on a refusal);
    BadConversation with the reason if nothing can be sent."""
    fallback = _prompt(row, prompt_field)
    try:
        normalized = normalize_row(replies_neutralised(row))
        # media in every form, as vLLM's chat endpoint reads them (image_url, file:// URLs)
        turns = media_forms.for_vllm(normalized.conversation)
        tools, notes = normalized.tools, normalized.notes
    except BadConversation:
        if fallback is None:
            raise
        turns, tools, notes = fallback, None, []
    plan = Plan(steps_of(turns, result_names))
    if not plan and fallback is not None:  # messages but no user turn: upstream's fallback
        plan, tools = Plan(steps_of(fallback)), None
    plan.notes = list(notes)
    if not plan:
        raise BadConversation(NO_USER_TURN)
    if tokenizer is not None:
        plan.pending = (tokenizer, tools)
    return plan, tools


def _prompt(row: Mapping[str, Any], prompt_field: str | None) -> list[dict[str, Any]] | None:
    prompt = row.get(prompt_field) if prompt_field else None
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) and prompt else None


def replies_neutralised(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """The row with what only the replies carry made neutral (module docstring): no turn
    ``weight``/``train``, a call's arguments that are not a JSON object sent as ``{}``. The
    replies are replaced by the target's, so prepare_data's rules on them do not apply."""
    try:
        conv, column = find_conversation(row, ColumnOptions())
    except NoConversation:
        return row
    if not isinstance(conv, list) or "->" in column:
        return row
    turns = [_neutral_turn(turn) if isinstance(turn, Mapping) else turn for turn in conv]
    return {**row, column: turns}


def _neutral_turn(turn: Mapping[str, Any]) -> Mapping[str, Any]:
    out = {k: v for k, v in turn.items() if k not in ("weight", "train")}
    calls = out.get("tool_calls")
    if isinstance(calls, list):
        out["tool_calls"] = [_neutral_call(call) for call in calls]
    return out


def _neutral_call(call: Any) -> Any:
    if not isinstance(call, Mapping):
        return call
    function = call.get("function")
    if not isinstance(function, Mapping):
        return call
    arguments = function.get("arguments")
    if isinstance(arguments, Mapping):
        return call
    if isinstance(arguments, str):
        try:
            if isinstance(json.loads(arguments), Mapping):
                return call
        except ValueError:
            pass
    return {**call, "function": {**function, "arguments": _NEUTRAL_ARGUMENTS}}


def steps_of(turns: list[dict[str, Any]], result_names: ResultNames | None = None) -> list[Step]:
    """One step per user turn (module docstring); original assistant turns are dropped, their
    calls only tell which tool each following result answers."""
    steps: list[Step] = []
    lead: list[dict[str, Any]] = []
    calls: dict[str, str] = {}  # original call id -> tool name, in this step
    unanswered: list[str] = []  # names of this step's original calls not answered yet
    for turn in turns:
        role = turn["role"]
        if role == "user" and any(m["role"] == "user" for m in lead):
            steps.append(Step(lead))  # two user turns in a row: each gets a reply
            lead, calls, unanswered = [], {}, []
        if role in ("system", "user"):
            lead.append(_message(turn))
        elif role == "assistant":
            if any(m["role"] == "user" for m in lead):
                steps.append(Step(lead))
                lead, calls, unanswered = [], {}, []
            for call in turn.get("tool_calls") or []:
                name = _call_name(call)
                if isinstance(call, Mapping) and call.get("id"):
                    calls[str(call["id"])] = name
                unanswered.append(name)
        elif role == "tool":
            named = (
                unanswered or turn.get("name") or _payload_name(turn.get("content"), result_names)
            )
            if steps and named and not lead:  # answers a call of the current step
                name = _result_name(turn, calls, unanswered, result_names)
                steps[-1].results.append(CachedResult(name, turn.get("content")))
            else:  # a result before any call: context, never an answer to a new call
                lead.append(_message(turn))
    if any(m["role"] == "user" for m in lead):
        steps.append(Step(lead))
    return steps


def _render(tokenizer: Any, messages: list[dict[str, Any]], tools: Any) -> Any:
    """The prompt's text as vLLM's template renders it (its messages and tools as vLLM hands
    them over), or the data problem the template raised."""
    from speculators_qwen_compat.data.render.render import template_messages, template_tools

    template = getattr(tokenizer, "chat_template", None)
    try:
        return tokenizer.apply_chat_template(
            template_messages(messages, template if isinstance(template, str) else None),
            tools=template_tools(tools),
            add_generation_prompt=True,
            tokenize=False,
        )
    except Exception as exc:
        if not is_data_problem(exc):
            raise
        return exc


def _message(turn: Mapping[str, Any]) -> dict[str, Any]:
    """What is sent for a system, user or context turn."""
    out = {"role": turn["role"], "content": turn.get("content")}
    if turn["role"] == "tool" and turn.get("tool_call_id"):
        out["tool_call_id"] = turn["tool_call_id"]
    if isinstance(turn.get("name"), str) and turn["role"] != "tool":
        out["name"] = turn["name"]
    return out


def _call_name(call: Any) -> str:
    function = call.get("function") if isinstance(call, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    return str(name) if name else ""


def _result_name(
    turn: Mapping[str, Any],
    calls: dict[str, str],
    unanswered: list[str],
    result_names: ResultNames | None,
) -> str:
    """The tool a cached result answers: by id, by name, by payload, else the next unanswered
    call of its step in the data (the order the data itself pairs them in)."""
    name = calls.get(str(turn.get("tool_call_id") or ""))
    if not name and isinstance(turn.get("name"), str):
        name = turn["name"]
    if not name:
        name = _payload_name(turn.get("content"), result_names)
    if not name:
        name = unanswered[0]  # `named` above: a call is waiting when nothing else names it
    if name in unanswered:
        unanswered.remove(name)
    return name


def _payload_name(content: Any, result_names: ResultNames | None = None) -> str | None:
    """The tool a result names: its ``<tool_response>{"name": ...}</tool_response>`` payload
    (Hermes, Qwen3; read by upstream's ``_tool_result_names`` when given), or the ``name`` of a
    result that is such a JSON object itself."""
    if not isinstance(content, str):
        return None
    if result_names is not None:
        names = result_names(content)
        if names:
            return str(names[0])
    blocks = _TOOL_RESPONSE.findall(content) if result_names is None else []
    for block in [*blocks, content]:
        try:
            value = json.loads(block)
        except (TypeError, ValueError):
            continue
        if isinstance(value, Mapping) and isinstance(value.get("name"), str):
            return value["name"]
    return None
