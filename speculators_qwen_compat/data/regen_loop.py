"""One conversation regenerated step by step (regen_plan.py), as speculators 0.8+'s
``regenerate_conversation`` does, without losing what it loses (docs/upstream.md "Regenerate
responses"):

- each reply is one boundary row, built by upstream's own ``_sample_from_response``;
- a reply still inside its thinking when ``max_tokens`` ran out (no content, no call, finish
  reason ``length``) is not a row and not a failure of the whole conversation: the rows of the
  steps before it are kept and the conversation is counted as cut short by that reason;
- the target's tool calls are answered with the data's cached results paired by tool name (each
  result's name resolved by id, name or payload in regen_plan.py), never by position; a call the
  data has no result for ends the conversation there, counted by reason;
- the assistant turns sent back keep the reply's ``reasoning`` (vLLM's field), so the template
  renders it where it keeps reasoning (Qwen3.6: the steps after the last user query);
- a request the server refuses for its content (400/413/422) after earlier steps were answered
  keeps those steps; a fault of the server (unreachable, 5xx or 408/429 after upstream's
  retries, 401/403/404/405, a reply without token ids) is handed to ``RunState.fault`` and ends
  the run: it is never a counted conversation.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from speculators_qwen_compat.data import regen_state
from speculators_qwen_compat.data.regen_plan import Plan, Step

STILL_THINKING = "reply still thinking at --max-tokens"
REPLY_CUT = "reply cut at --max-tokens"
TOTAL_REACHED = "prompt + reply above --max-tokens (speculators stops the conversation there)"
EMPTY_REPLY = "empty reply"
NO_RESULT = "the target called {name!r}; the data has no result for it"
#: HTTP statuses that refuse a request for its content (the conversation's fault).
REFUSALS = (400, 413, 422)
_STATUS = re.compile(r"HTTP (\d{3}) from ")
_MESSAGE = re.compile(r'"message"\s*:\s*"((?:[^"\\]|\\.)*)')


class Refused(Exception):
    """The server refused one request for its content; the message is the server's reason."""


async def regenerate(
    post_fn: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]],
    item: dict[str, Any],
    *,
    model: str,
    max_tokens: int,
    sampling_params: dict[str, Any],
    samples: list[dict[str, Any]],
    sample_from_response: Callable[..., tuple[dict[str, Any], dict[str, Any], Any]],
    sample_args: dict[str, Any],
    overrides: dict[str, Any],
) -> bool:
    """Regenerate ``item["turns"]`` (a Plan) into ``samples``; True when cut short. Raises when
    nothing could be written (the conversation goes to upstream's errors file, counted)."""
    plan: Plan = item["turns"]
    recorded = {**sampling_params, **overrides}
    prefix: list[dict[str, Any]] = []
    reason = None
    try:
        for step in plan:
            prefix.extend(step.lead)
            reason = await _step(
                post_fn, step, prefix, item, model, max_tokens, recorded, samples,
                sample_from_response, sample_args,
            )  # fmt: skip
            if reason:
                break
        else:
            reason = plan.stop_reason
    except Refused as exc:
        reason = str(exc)
    except Exception as exc:
        fault = fault_of(exc)
        if fault is not None:
            await regen_state.fault(fault)  # ends the run; returns only when none is open
        else:
            regen_state.count_error(exc)  # a bug, not the data: limited like prepare_data's
        raise
    tally = regen_state.tally()
    if not samples:
        reason = reason or EMPTY_REPLY
        tally.failed[reason] += 1
        raise NothingRegenerated(reason)
    tally.rows_out += len(samples)
    if reason:
        tally.cut_short[reason] += 1
    else:
        tally.regenerated += 1
    return bool(reason)


class NothingRegenerated(ValueError):
    """No row could be written for the conversation (its first reply); upstream's worker puts
    it in the errors file, and it is counted as failed by this reason."""


async def _step(
    post_fn: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]],
    step: Step,
    prefix: list[dict[str, Any]],
    item: dict[str, Any],
    model: str,
    max_tokens: int,
    recorded: dict[str, Any],
    samples: list[dict[str, Any]],
    sample_from_response: Callable[..., tuple[dict[str, Any], dict[str, Any], Any]],
    sample_args: dict[str, Any],
) -> str | None:
    """Ask for one step's reply (and the tool loop after it); the reason it stopped the
    conversation, or None when the step ended in an answer."""
    results = list(step.results)
    while True:
        payload: dict[str, Any] = {
            **recorded,
            "model": model,
            "messages": prefix,
            "max_tokens": max_tokens,
            "return_token_ids": True,
        }
        if item.get("tools"):
            payload["tools"] = item["tools"]
            payload["tool_choice"] = "auto"
        data = await _post(post_fn, payload)
        choice = (data.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        calls = message.get("tool_calls")
        if not message.get("content") and not calls:
            return STILL_THINKING if choice.get("finish_reason") == "length" else EMPTY_REPLY
        if not data.get("prompt_token_ids") or not choice.get("token_ids"):
            raise NoTokenIds("the server's reply has no token ids (it must be vLLM, which "
                             "returns them for return_token_ids)")  # fmt: skip
        sample, assistant, calls = sample_from_response(
            data, sample_index=len(samples), sampling_params=recorded, **sample_args
        )
        samples.append(sample)
        reasoning = message.get("reasoning") or message.get("reasoning_content")
        if reasoning:
            assistant = {**assistant, "reasoning": reasoning}
        prefix.append(assistant)
        if choice.get("finish_reason") == "length":
            return REPLY_CUT
        total = len(data.get("prompt_token_ids") or []) + len(choice.get("token_ids") or [])
        if total > max_tokens:
            return TOTAL_REACHED
        if not calls:
            return None
        for call in calls:
            name = (call.get("function") or {}).get("name")
            result = next((r for r in results if r.name == name), None)
            if result is None:
                return NO_RESULT.format(name=name)
            results.remove(result)
            answer: dict[str, Any] = {"role": "tool", "content": result.content}
            if call.get("id"):
                answer["tool_call_id"] = call["id"]
            prefix.append(answer)


class NoTokenIds(Exception):
    """The endpoint answered without token ids: not vLLM, or too old. A fault, not data."""


async def _post(
    post_fn: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]], payload: dict[str, Any]
) -> dict[str, Any]:
    try:
        return await post_fn(payload)
    except Exception as exc:
        status = _status(exc)
        if status in REFUSALS:
            raise Refused(_server_reason(str(exc), status)) from exc
        raise


def fault_of(exc: BaseException) -> str | None:
    """What went wrong with the server, or None when ``exc`` is not a server fault."""
    if isinstance(exc, NoTokenIds):
        return str(exc)
    status = _status(exc)
    if status is not None:
        return None if status in REFUSALS else " ".join(str(exc).split())[:300]
    import aiohttp

    if isinstance(exc, (aiohttp.ClientError, OSError, asyncio.TimeoutError)):
        return f"{type(exc).__name__}: {exc}"[:300]
    return None


def _status(exc: BaseException) -> int | None:
    """The HTTP status of upstream's ``_post_chat`` error (``HTTP 404 from URL: body``)."""
    match = _STATUS.search(str(exc))
    return int(match.group(1)) if match else None


def _server_reason(text: str, status: int) -> str:
    """vLLM's error message (for a template error, the template's words), else the status."""
    match = _MESSAGE.search(text)
    if match:
        try:
            return " ".join(json.loads(f'"{match.group(1)}"').split())[:200]
        except ValueError:
            return " ".join(match.group(1).split())[:200]
    return f"the server refused the request (HTTP {status})"
