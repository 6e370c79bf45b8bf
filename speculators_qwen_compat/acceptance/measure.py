"""One endpoint's run: its counters, the prompts sent at temperature 0, its counters again.

Why: figures must be the increase over this run's own requests, so counters are read right
before the first request and after the last answer (again until two reads agree: vLLM records a
step's counts beside sending its outputs). Faults become one line (command.py).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from speculators_qwen_compat.acceptance import counters
from speculators_qwen_compat.acceptance.counters import Increase, Snapshot
from speculators_qwen_compat.acceptance.prompts import Prompt
from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.doctor.endpoint import HttpRefused, api_base, fetch, request_json

#: reads of /metrics after the run until two agree, and the pause between them
SETTLE_READS = 10
SETTLE_PAUSE = 0.2


@dataclass
class Result:
    """What one endpoint did for the run's prompts."""

    endpoint: str
    model: str
    requests: int
    completion_tokens: int
    seconds: float
    running_at_start: float
    increase: Increase | None  # None: no speculative decoding
    has_metrics: bool = True

    @property
    def tokens_per_second(self) -> float:
        return self.completion_tokens / self.seconds if self.seconds > 0 else 0.0


def served_model(base: str, asked: str | None) -> str:
    """The model to name: ``asked`` when the server lists it, else the one it lists."""
    try:
        listed = [str(m["id"]) for m in request_json(base + "/models", timeout=30).get("data", [])]
    except CompatError as exc:
        raise CompatError(f"{exc}: is vLLM serving there? start it or fix --endpoint") from None
    if asked is not None and asked not in listed:
        raise CompatError(
            f"--model {asked}: the server at {base} serves {', '.join(listed) or 'no model'}; "
            "pass the name it serves (vllm serve --served-model-name sets it)"
        )
    if asked is None and len(listed) != 1:
        raise CompatError(
            f"the server at {base} serves {', '.join(listed) or 'no model yet'}: "
            "choose one with --model"
        )
    return asked or listed[0]


def read_metrics(base: str) -> Snapshot | None:
    """The server's counters now; None when it has no /metrics (not vLLM's OpenAI server)."""
    root = base.removesuffix("/v1")
    try:
        return counters.parse(fetch(root + "/metrics", timeout=30).decode(errors="replace"))
    except HttpRefused as exc:
        if exc.status == 404:
            return None
        raise


def _settled(base: str) -> Snapshot | None:
    last = read_metrics(base)
    for _ in range(SETTLE_READS):
        time.sleep(SETTLE_PAUSE)
        now = read_metrics(base)
        if now == last:
            break
        last = now
    return last


def measure(
    endpoint: str,
    prompts: list[Prompt],
    model: str | None,
    max_tokens: int,
    concurrency: int,
    tick: Callable[[], None] = lambda: None,
    warn: Callable[[str], None] = lambda line: None,
    timeout: float = 600.0,
) -> Result:
    """Send every prompt to ``endpoint`` (``concurrency`` at a time), ``tick`` per answer;
    ``warn`` at once when the server is already running requests (they count too)."""
    base = api_base(endpoint)
    name = served_model(base, model)
    before = read_metrics(base)
    if before is not None and before.running:
        warn(
            f"warning: {base} was running {before.running:.0f} requests when the measurement "
            "started: other traffic counts in its figures"
        )
    start = time.monotonic()
    tokens = _send_all(base, name, prompts, max_tokens, concurrency, tick, timeout)
    seconds = time.monotonic() - start
    after = _settled(base) if before is not None else None
    try:
        added = None if before is None or after is None else counters.increase(before, after)
    except ValueError as exc:
        raise CompatError(f"the server at {base}: {exc}; measure again") from None
    return Result(
        endpoint=base, model=name, requests=len(prompts), completion_tokens=tokens,
        seconds=seconds, running_at_start=before.running if before else 0.0, increase=added,
        has_metrics=before is not None,
    )  # fmt: skip


def _send_all(
    base: str,
    model: str,
    prompts: list[Prompt],
    max_tokens: int,
    concurrency: int,
    tick: Callable[[], None],
    timeout: float,
) -> int:
    """Completion tokens of all answers; the first failure stops the run (raised here)."""
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
    total = 0
    for _ in prompts:
        answer = done.get()
        if isinstance(answer, BaseException):
            stop.set()
            raise answer
        total += answer
        tick()
    return total


def _complete(base: str, model: str, prompt: Prompt, max_tokens: int, timeout: float) -> int:
    body: dict[str, Any] = {
        "model": model, "messages": prompt.messages, "max_tokens": max_tokens, "temperature": 0,
    }  # fmt: skip
    if prompt.tools:  # rendered as in training; "none": no tool parser needed on the server
        body.update(tools=prompt.tools, tool_choice="none")
    try:
        reply = request_json(base + "/chat/completions", body, timeout=timeout)
    except HttpRefused as exc:
        raise CompatError(
            f"the server refused the request for {prompt.source} ({exc}); fix that row or leave "
            "it out of --data, or check the server's log"
        ) from None
    return int((reply.get("usage") or {}).get("completion_tokens") or 0)
