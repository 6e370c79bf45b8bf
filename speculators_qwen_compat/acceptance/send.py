"""The run's chat requests, ``concurrency`` at a time, and what became of each.

Why: one request's failure is not the server's, and infrastructure faults are never counted as
data. A refusal of the prompt (400/413/422) skips it; a 5xx, 429, timeout or lost connection is
retried, then the server is asked whether it is alive: yes counts one failure, no ends the run.
"""

from __future__ import annotations

import queue
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from speculators_qwen_compat.acceptance.prompts import Prompt
from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.doctor.endpoint import HttpRefused, fetch, request_json

#: statuses that refuse the prompt itself (template, validation, length): it never ran
PROMPT_REFUSED = (400, 413, 422)
#: retries of a request that met a server fault, the first pause (doubled each time), and the
#: seconds after the first attempt past which no retry starts
RETRIES = 3
BACKOFF = 0.5
RETRY_BUDGET = 120.0
_MESSAGE = re.compile(r'"message"\s*:\s*"((?:[^"\\]|\\.)*)"')


@dataclass
class Sent:
    """The answers' count and completion tokens, the prompts refused by reason, the failures."""

    answered: int = 0
    completion_tokens: int = 0
    skipped: Counter = field(default_factory=Counter)
    failed: Counter = field(default_factory=Counter)


class _Skip(Exception):
    """A request whose prompt the server refused (the reason as message)."""


class _Failed(Exception):
    """A request the server, still alive, did not answer (the reason as message)."""


def send_all(
    base: str,
    model: str,
    prompts: list[Prompt],
    max_tokens: int,
    concurrency: int,
    tick: Callable[[], None],
    timeout: float,
) -> Sent:
    """Every prompt sent, ``tick`` per request settled; a dead server or another refusal
    (wrong model, authorisation) is a CompatError raised here."""
    todo: queue.Queue[Prompt] = queue.Queue()
    for prompt in prompts:
        todo.put(prompt)
    done: queue.Queue[int | BaseException] = queue.Queue()
    stop = threading.Event()

    def work() -> None:
        while not stop.is_set():
            try:
                prompt = todo.get_nowait()
            except queue.Empty:
                return
            try:
                done.put(_complete(base, model, prompt, max_tokens, timeout))
            except BaseException as exc:  # handed to the main thread
                done.put(exc)

    for _ in range(min(concurrency, len(prompts))):
        threading.Thread(target=work, daemon=True).start()  # daemons: an error exits at once
    sent = Sent()
    for _ in prompts:
        answer = done.get()
        if isinstance(answer, _Skip):
            sent.skipped[str(answer)] += 1
        elif isinstance(answer, _Failed):
            sent.failed[str(answer)] += 1
        elif isinstance(answer, BaseException):
            stop.set()
            raise answer
        else:
            sent.answered += 1
            sent.completion_tokens += answer
        tick()
    return sent


def _complete(base: str, model: str, prompt: Prompt, max_tokens: int, timeout: float) -> int:
    body: dict[str, Any] = {
        "model": model, "messages": prompt.messages, "max_tokens": max_tokens, "temperature": 0,
    }  # fmt: skip
    if prompt.tools:  # rendered as in training; "none": no tool parser needed on the server
        body.update(tools=prompt.tools, tool_choice="none")
    first, pause = time.monotonic(), BACKOFF
    for attempt in range(RETRIES + 1):
        try:
            reply = request_json(base + "/chat/completions", body, timeout=timeout)
            return int((reply.get("usage") or {}).get("completion_tokens") or 0)
        except HttpRefused as exc:
            if exc.status in PROMPT_REFUSED:
                raise _Skip(f"HTTP {exc.status}: {_reason(exc)}") from None
            if exc.status < 500 and exc.status != 429:
                message = f"the server refused the request for {prompt.source} ({exc})"
                raise CompatError(message) from None
            fault: CompatError = exc
        except CompatError as exc:  # no answer: a timeout, a lost connection, not JSON
            fault = exc
        if attempt == RETRIES or time.monotonic() + pause - first > RETRY_BUDGET:
            break
        time.sleep(pause)
        pause *= 2
    if not alive(base):
        raise CompatError(
            f"the server at {base.removesuffix('/v1')} stopped answering ({fault}); "
            "measure again once it is back"
        )
    status = f"HTTP {fault.status}" if isinstance(fault, HttpRefused) else "no answer"
    raise _Failed(status)


def alive(base: str) -> bool:
    """Whether the server answers ``/health`` (vLLM's) or, without it, ``/v1/models``."""
    for url in (base.removesuffix("/v1") + "/health", base + "/models"):
        try:
            fetch(url, timeout=10)
            return True
        except HttpRefused as exc:
            if exc.status != 404:
                return False
        except CompatError:
            return False
    return False


def _reason(exc: HttpRefused) -> str:
    """The error message of vLLM's JSON body, else the body, short enough to count by."""
    detail = str(exc).split(": ", 2)[-1]
    match = _MESSAGE.search(detail)
    text = match.group(1) if match else detail
    return text if len(text) <= 80 else text[:77] + "..."
