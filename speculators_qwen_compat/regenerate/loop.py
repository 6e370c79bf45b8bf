"""One conversation regenerated step by step, and what each failed request means.

Target: ``regenerate_conversation`` (0.8+; docs/upstream.md, "Regenerate responses"). Results
paired by name, reasoning sent back, a cut reply kept; a failed request is the conversation's or,
by a liveness probe, the server's (docs/regenerate-responses.md, "Faults of the outside world").
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from speculators_qwen_compat.regenerate import state as run_state
from speculators_qwen_compat.regenerate.plan import Plan, Step

STILL_THINKING = "reply still thinking at --max-tokens (kept)"
REPLY_CUT = "reply cut at --max-tokens"
TOTAL_REACHED = "prompt + reply above --max-tokens (speculators stops the conversation there)"
EMPTY_REPLY = "empty reply"
NO_RESULT = "the target called {name!r}; the data has no result for it"
TOOL_FLAGS = "--enable-auto-tool-choice --tool-call-parser"
NO_TOOL_PARSER = (
    "the server refuses every conversation with tools alike ({reason}): serve the target with "
    f"{TOOL_FLAGS} qwen3_coder (Qwen3.5/3.6) and rerun with --resume"
)
#: tool conversations refused with the same message, none answered: the server's set-up
ALIKE_REFUSALS = 3
#: HTTP statuses that refuse a request for its content (the conversation's fault).
REFUSALS = (400, 413, 422)
#: statuses upstream retries (vllm_client ``with_retries``; ``_post_chat`` :281)
TRANSIENT = (408, 409, 425, 429)
PROBE_TIMEOUT = 15.0
_STATUS = re.compile(r"HTTP (\d{3}) from ")
_MESSAGE = re.compile(r'"message"\s*:\s*"((?:[^"\\]|\\.)*)')

Post = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
Probe = Callable[[], Awaitable[bool]]


class Refused(Exception):
    """The server refused one request for its content; the message is the server's reason
    (its numbers grouped: ``grouped``), ``said`` its whole words for the errors file."""

    def __init__(self, reason: str, said: str = "") -> None:
        super().__init__(reason)
        self.said = said or reason


class Unanswered(Exception):
    """A request outlived its retries (5xx, 408/429, a timeout, a dropped connection)."""


class NoTokenIds(Exception):
    """The endpoint answered without token ids: not vLLM, or too old. A fault, not data."""


class NothingRegenerated(ValueError):
    """No row could be written for the conversation; upstream's worker puts it in the errors
    file, and it is counted as failed by this reason."""


async def regenerate(
    post_fn: Post,
    item: dict[str, Any],
    *,
    model: str,
    max_tokens: int,
    sampling_params: dict[str, Any],
    samples: list[dict[str, Any]],
    sample_from_response: Callable[..., tuple[dict[str, Any], dict[str, Any], Any]],
    tool_result_message: Callable[[dict[str, Any], Any], dict[str, Any]],
    sample_args: dict[str, Any],
    overrides: dict[str, Any],
    probe: Probe | None = None,
) -> bool:
    """Regenerate ``item["turns"]`` (a Plan) into ``samples``; True when cut short. Raises when
    nothing could be written (the conversation goes to upstream's errors file, counted)."""
    plan: Plan = item["turns"]
    tally = run_state.tally()
    recorded = {**sampling_params, **overrides}
    prefix: list[dict[str, Any]] = []
    reason = said = None
    try:
        for step in plan:
            prefix.extend(step.lead)
            reason = await _step(
                post_fn, step, prefix, item, model, max_tokens, recorded, samples,
                sample_from_response, tool_result_message, sample_args,
            )  # fmt: skip
            if reason:
                break
    except Refused as exc:
        # the server's template judged the prompt; a first prompt refused is the data's
        # (skipped) when the target's template, run here, refuses it too (its words)
        skip = await _template_skip(plan, item) if not samples else None
        if skip:
            tally.skipped[skip] += 1
            return False
        reason, said = str(exc), exc.said
        if item.get("tools") and not samples:
            _tool_refusal(reason)
    except Unanswered as exc:
        if probe is None or not await probe():
            await run_state.fault(f"{exc}; the server does not answer {_models_hint()}")
            raise
        if not samples:
            run_state.failed_by_server(str(item.get("primary_id")), str(exc))
            raise NothingRegenerated(str(exc)) from exc
        reason = str(exc)
    except Exception as exc:
        fault = fault_of(exc)
        if fault is not None:
            await run_state.fault(fault)  # ends the run; returns only when none is open
        else:
            # a bug, not the data: limited like prepare_data's
            run_state.count_error(exc, str(item.get("primary_id")))
        raise
    if not samples:
        reason = reason or EMPTY_REPLY
        run_state.count_failed(str(item.get("primary_id")), reason)
        raise NothingRegenerated(said or reason)  # the errors file keeps the server's words
    run_state.answered()
    _count(tally, item, reason, len(samples))
    return bool(reason)


def _count(tally: Any, item: dict[str, Any], reason: str | None, rows: int) -> None:
    """Count a conversation whose rows upstream writes next, once they are written
    (state.counted): a conversation whose rows a full disk refused is never counted."""

    def count() -> None:
        tally.rows_out += rows
        if reason:
            tally.cut_short[reason] += 1
        else:
            tally.regenerated += 1

    run_state.counted(str(item.get("primary_id")), count)


LONG_PROMPT = "conversations whose first prompt alone reaches --max-tokens"
#: a refused first prompt with at least this much text is rendered in a thread (bench/regen_loop.py:
#: a short one's render, a fraction of a millisecond, costs less than the hop)
THREAD_RENDER_BYTES = 32 * 1024


async def _template_skip(plan: Plan, item: dict[str, Any]) -> str | None:
    """The template's words when it refuses the plan's first prompt (``Plan.check``), else
    None; a tokenizer's own error here is a bug, counted. A long first prompt is rendered in a
    thread, off the event loop that feeds the requests; a short one here (its render costs
    less than the hop to a thread)."""
    if plan.pending is None or not plan:
        return None
    try:
        long = sum(_text_size(m) for m in plan[0].lead) >= THREAD_RENDER_BYTES
        return await asyncio.to_thread(plan.check) if long else plan.check()
    except Exception as exc:
        run_state.count_error(exc, str(item.get("primary_id")))
        raise


def _text_size(message: dict[str, Any]) -> int:
    """About how many characters a message carries (its content, a list's text parts)."""
    content = message.get("content")
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(str(part)) for part in content)
    return 0


async def _step(
    post_fn: Post,
    step: Step,
    prefix: list[dict[str, Any]],
    item: dict[str, Any],
    model: str,
    max_tokens: int,
    recorded: dict[str, Any],
    samples: list[dict[str, Any]],
    sample_from_response: Callable[..., tuple[dict[str, Any], dict[str, Any], Any]],
    tool_result_message: Callable[[dict[str, Any], Any], dict[str, Any]],
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
        if item.get("tools"):
            _tools_answered()
        choice = (data.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        calls = message.get("tool_calls")
        reasoning = message.get("reasoning") or message.get("reasoning_content")
        thinking = not message.get("content") and not calls
        if thinking and choice.get("finish_reason") != "length":
            return EMPTY_REPLY
        if not data.get("prompt_token_ids") or not choice.get("token_ids"):
            raise NoTokenIds("the server's reply has no token ids (it must be vLLM, which "
                             "returns them for return_token_ids)")  # fmt: skip
        if not samples and len(data["prompt_token_ids"]) >= max_tokens:
            # the first prompt alone reaches --max-tokens (the server's count): only its first
            # reply can come back
            run_state.tally().warnings[LONG_PROMPT] += 1
        if thinking:  # every sampled token is a row: upstream would call it empty
            shown = {**message, "content": reasoning or "(cut)"}
            data = {**data, "choices": [{**choice, "message": shown}, *data["choices"][1:]]}
        sample, assistant, calls = sample_from_response(
            data, sample_index=len(samples), sampling_params=recorded, **sample_args
        )
        samples.append(sample)
        if thinking:
            return STILL_THINKING
        if reasoning:
            assistant = {**assistant, "reasoning": reasoning, "reasoning_content": reasoning}
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
            prefix.append(tool_result_message(call, result.content))


async def _post(post_fn: Post, payload: dict[str, Any]) -> dict[str, Any]:
    try:
        return await post_fn(payload)
    except Exception as exc:
        status = status_of(exc)
        if status in REFUSALS:
            raise Refused(_server_reason(str(exc), status),
                          _server_reason(str(exc), status, grouped=False)) from exc  # fmt: skip
        unanswered = unanswered_reason(exc)
        if unanswered is not None:
            raise Unanswered(unanswered) from exc
        raise


def unanswered_reason(exc: BaseException) -> str | None:
    """The failed reason of a request that outlived its retries (module docstring), or None."""
    status = status_of(exc)
    if status is not None:
        if status >= 500 or status in TRANSIENT:
            return f"HTTP {status} after every retry"
        return None
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        timeout = run_state.SETTINGS.request_timeout
        return f"no answer within --request-timeout {timeout:g} s, after every retry"
    import aiohttp

    if isinstance(exc, (aiohttp.ClientError, OSError)):
        return f"{type(exc).__name__} after every retry"
    return None


def fault_of(exc: BaseException) -> str | None:
    """What went wrong with the server when it ends the run at once (401/403/404/405, no token
    ids), or None when ``exc`` is the conversation's (a refusal) or a bug."""
    if isinstance(exc, NoTokenIds):
        return str(exc)
    status = status_of(exc)
    if status is not None and status not in REFUSALS and unanswered_reason(exc) is None:
        said = " ".join(str(exc).split())[:300]
        if status == 404:
            said += (
                f" (the chat route is {CHAT_ROUTE}: --endpoint http://HOST:PORT{CHAT_ROUTE}, "
                "or the server's address alone)"
            )
        return said
    return None


def _models_hint() -> str:
    state = run_state.current()
    endpoint = state.endpoint if state is not None else ""
    return f"at {models_url(endpoint)}" if endpoint else "on /v1/models"


#: the route of the chat endpoint under the server's address
CHAT_ROUTE = "/v1/chat/completions"


def chat_endpoint(endpoint: str) -> str:
    """``--endpoint`` as upstream posts to it: the chat route added to the bare host
    (``http://HOST:PORT``) and to ``.../v1`` (as the README's other steps write the server's
    address), a trailing slash after the route dropped (vLLM's route has none: it would answer
    404); any other path is kept as given."""
    parts = urlsplit(endpoint)
    path = parts.path.rstrip("/")
    if not parts.scheme or not parts.netloc:
        return endpoint
    if not path:
        path = CHAT_ROUTE
    elif path.endswith("/v1"):
        path += CHAT_ROUTE[len("/v1") :]
    elif not path.endswith(CHAT_ROUTE):
        return endpoint
    return urlunsplit(parts._replace(path=path))


def models_url(endpoint: str) -> str:
    """``/v1/models`` of a chat-completions endpoint (as upstream's ``detect_model`` derives)."""
    if "/v1/" in endpoint:
        return endpoint.split("/v1/", 1)[0] + "/v1/models"
    return endpoint.rstrip("/") + "/v1/models"


async def probe_alive(endpoint: str, timeout: float = PROBE_TIMEOUT) -> bool:
    """Whether the server at ``endpoint`` answers ``/v1/models`` (else ``/health``) with 200."""
    import aiohttp

    base = models_url(endpoint).rsplit("/v1/models", 1)[0]
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as s:
            for url in (base + "/v1/models", base + "/health"):
                try:
                    async with s.get(url) as response:
                        if response.status == 200:
                            return True
                except aiohttp.ClientResponseError:
                    continue
    except (TimeoutError, aiohttp.ClientError, OSError):
        return False
    return False


def _tools_answered() -> None:
    state = run_state.current()
    if state is not None:
        state.tools_answered = True


def _tool_refusal(reason: str) -> None:
    """A tool conversation's first request refused: the same words for every one of them, and
    none answered, is a server without a tool parser (module docstring)."""
    state = run_state.current()
    if state is None or state.tools_answered:
        return
    state.tool_refusals[reason] = state.tool_refusals.get(reason, 0) + 1
    flagged = "tool-call-parser" in reason or "auto-tool-choice" in reason
    if flagged or state.tool_refusals[reason] >= ALIKE_REFUSALS:
        run_state.end_run(NO_TOOL_PARSER.format(reason=reason), server_fault=False)


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of upstream's ``_post_chat`` error (``HTTP 404 from URL: body``)."""
    match = _STATUS.search(str(exc))
    return int(match.group(1)) if match else None


def _server_reason(text: str, status: int, grouped: bool = True) -> str:
    """vLLM's error message (for a template error, the template's words), else the status;
    the numbers in it (a request's token counts) are N, so one kind of refusal is one reason
    (the errors file keeps each request's own message)."""
    match = _MESSAGE.search(text)
    if match:
        try:
            message = json.loads(f'"{match.group(1)}"')
        except ValueError:
            message = match.group(1)
        message = " ".join(message.split())
        return (group_numbers(message) if grouped else message)[:200]
    return f"the server refused the request (HTTP {status})"


#: a number standing alone in a server's message (not part of a name such as Qwen3.5 or v1)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?!\w|[.,]\d)")


def group_numbers(message: str) -> str:
    """A server's message with each number standing alone replaced by N."""
    return _NUMBER.sub("N", message)
