"""What regenerate-responses will ask the target for one conversation, decided before any request.

speculators 0.8+'s ``regenerate-responses`` keeps only system and user turns and the tool
results (docs/upstream.md "Regenerate responses"): rows without a user turn vanish, ``developer``
turns and LLaMA-Factory ``observation`` turns are lost, and the cached results are spliced back
by position. Here a row goes through the normaliser prepare_data uses (normalize.py: roles by
table, shapes by the formats table) and becomes a ``Plan``: one ``Step`` per user turn, each with
the messages that lead up to the reply (system turns, the user turn, tool results that answer no
call: context) and the cached tool results of that step, each with the name of the tool it
answers (by ``tool_call_id``, the turn's ``name``, a Qwen3/Hermes ``<tool_response>`` payload's
``name``, or the call it follows in the data). Each step's prompt is rendered with the target's
own template (render.py): the first step the template rejects ends the plan there (the steps
before it are still regenerated) and a plan with no step left is a skip with the template's
words. A row that cannot be planned raises ``BadConversation`` (the skip reason).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from speculators_qwen_compat.core.errors import reason_of
from speculators_qwen_compat.data import media_forms
from speculators_qwen_compat.data.normalize import BadConversation, normalize_row
from speculators_qwen_compat.data.row_errors import is_data_problem

NO_USER_TURN = "no user turn"
_TOOL_RESPONSE = re.compile(r"<tool_response>\s*(.*?)\s*</tool_response>", re.DOTALL)


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
    prompt_tokens: int = 0


class Plan(list):
    """A conversation's steps (a list, so it travels in upstream's ``turns`` slot), with where
    the template stops it (``stop_reason``: the steps after the last one are not asked for)."""

    stop_reason: str | None = None
    notes: list[str]

    def __init__(self, steps: list[Step], stop_reason: str | None = None) -> None:
        super().__init__(steps)
        self.stop_reason = stop_reason
        self.notes = []


def plan_row(
    row: Mapping[str, Any], prompt_field: str | None = None, tokenizer: Any = None
) -> tuple[Plan, Any]:
    """(the steps, the tools in the OpenAI shape or None) of one row, checked against the
    tokenizer's template when one is given; BadConversation with the reason if none is left."""
    try:
        normalized = normalize_row(row)
        # media in every form, as vLLM's chat endpoint reads them (image_url, file:// URLs)
        turns = media_forms.for_vllm(normalized.conversation)
        tools, notes = normalized.tools, normalized.notes
    except BadConversation:
        prompt = row.get(prompt_field) if prompt_field else None
        if not (isinstance(prompt, str) and prompt):
            raise
        turns, tools, notes = [{"role": "user", "content": prompt}], None, []
    plan = Plan(steps_of(turns))
    plan.notes = list(notes)
    if not plan:
        raise BadConversation(NO_USER_TURN)
    if tokenizer is not None:
        check_template(plan, prompts_as_in_data(turns), tokenizer, tools)
    return plan, tools


def steps_of(turns: list[dict[str, Any]]) -> list[Step]:
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
            named = unanswered or turn.get("name") or _payload_name(turn.get("content"))
            if steps and named and not lead:  # answers a call of the current step
                name = _result_name(turn, calls, unanswered)
                steps[-1].results.append(CachedResult(name, turn.get("content")))
            else:  # a result before any call: context, never an answer to a new call
                lead.append(_message(turn))
    if any(m["role"] == "user" for m in lead):
        steps.append(Step(lead))
    return steps


def check_template(
    plan: Plan,
    turns_of_steps: list[list[dict[str, Any]]],
    tokenizer: Any,
    tools: Any,
) -> None:
    """Render each step's prompt (``turns_of_steps[k]``: the conversation as the data has it up
    to step k's reply) with the target's template; cut the plan at the first one rejected."""
    from speculators_qwen_compat.data.render import render_ids

    for index, messages in enumerate(turns_of_steps):
        try:
            ids = render_ids(tokenizer, messages, add_generation_prompt=True, tools=tools)
        except Exception as exc:
            if not is_data_problem(exc):
                raise
            reason = reason_of(exc)
            if index == 0:
                raise BadConversation(reason) from None
            plan.stop_reason = reason
            del plan[index:]
            return
        plan[index].prompt_tokens = len(ids)


def prompts_as_in_data(turns: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """For each step of ``steps_of(turns)``, the data's own conversation up to its reply (what
    the template is checked on before the target's replies exist)."""
    prompts: list[list[dict[str, Any]]] = []
    seen_user = False
    for index, turn in enumerate(turns):
        role = turn["role"]
        if role == "user" and seen_user:
            prompts.append(turns[:index])
        if role == "user":
            seen_user = True
        elif role == "assistant" and seen_user:
            prompts.append(turns[:index])
            seen_user = False
    if seen_user:
        prompts.append(list(turns))
    return prompts


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


def _result_name(turn: Mapping[str, Any], calls: dict[str, str], unanswered: list[str]) -> str:
    """The tool a cached result answers: by id, by name, by payload, else the next unanswered
    call of its step in the data (the order the data itself pairs them in)."""
    name = calls.get(str(turn.get("tool_call_id") or ""))
    if not name and isinstance(turn.get("name"), str):
        name = turn["name"]
    if not name:
        name = _payload_name(turn.get("content"))
    if not name:
        name = unanswered[0]  # `named` above: a call is waiting when nothing else names it
    if name in unanswered:
        unanswered.remove(name)
    return name


def _payload_name(content: Any) -> str | None:
    """The ``name`` of a ``<tool_response>{"name": ...}</tool_response>`` payload (Hermes,
    Qwen3), or of a result that is such a JSON object itself."""
    if not isinstance(content, str):
        return None
    blocks = _TOOL_RESPONSE.findall(content) or [content]
    for block in blocks:
        try:
            value = json.loads(block)
        except (TypeError, ValueError):
            continue
        if isinstance(value, Mapping) and isinstance(value.get("name"), str):
            return value["name"]
    return None
