"""One endpoint's run: its counters, the prompts sent at temperature 0, its counters again.

Why: figures must be the increase over this run's own requests, so counters are read right
before the first request and after the last answer (again until two reads agree: vLLM records a
step's counts beside sending its outputs). Faults become one line (command.py).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from speculators_qwen_compat.acceptance import counters
from speculators_qwen_compat.acceptance.counters import Increase, Snapshot
from speculators_qwen_compat.acceptance.prompts import Prompt
from speculators_qwen_compat.acceptance.send import Sent, send_all
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
    requests: int  # answered
    completion_tokens: int
    seconds: float
    running_at_start: float
    increase: Increase | None  # None: no speculative decoding
    has_metrics: bool = True
    skipped: Counter = field(default_factory=Counter)  # prompts refused, by reason
    failed: Counter = field(default_factory=Counter)  # server faults of a live server, by kind

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


def read_metrics(base: str, model: str) -> Snapshot | None:
    """The server's counters now; None when it has no /metrics (not vLLM's OpenAI server)."""
    root = base.removesuffix("/v1")
    try:
        text = fetch(root + "/metrics", timeout=30).decode(errors="replace")
        return counters.parse(text, model)
    except HttpRefused as exc:
        if exc.status == 404:
            return None
        raise


def _settled(base: str, model: str) -> Snapshot | None:
    last = read_metrics(base, model)
    for _ in range(SETTLE_READS):
        time.sleep(SETTLE_PAUSE)
        now = read_metrics(base, model)
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
    before = read_metrics(base, name)
    if before is not None and before.running:
        warn(
            f"warning: {base} was running {before.running:.0f} requests when the measurement "
            "started: other traffic counts in its figures"
        )
    start = time.monotonic()
    sent = send_all(base, name, prompts, max_tokens, concurrency, tick, timeout)
    seconds = time.monotonic() - start
    after = _settled(base, name) if before is not None else None
    try:
        added = None if before is None or after is None else counters.increase(before, after)
    except ValueError as exc:
        raise CompatError(f"the server at {base}: {exc}; measure again") from None
    _measured_something(base, sent, added)
    return Result(
        endpoint=base, model=name, requests=sent.answered, completion_tokens=sent.completion_tokens,
        seconds=seconds, running_at_start=before.running if before else 0.0, increase=added,
        has_metrics=before is not None, skipped=sent.skipped, failed=sent.failed,
    )  # fmt: skip


def _measured_something(base: str, sent: Sent, added: Increase | None) -> None:
    """A run that measured nothing is an error, not a column of zeros."""
    if not sent.answered:
        why = "; ".join(f"{n} {reason}" for reason, n in (sent.skipped + sent.failed).items())
        raise CompatError(
            f"the server at {base} answered none of the requests ({why}): check the server's log; "
            "a refused row is one to fix or leave out of --data"
        )
    if not sent.completion_tokens:
        raise CompatError(
            f"the server at {base} answered without usage (completion_tokens): no tokens/s; "
            "is it vLLM's OpenAI server?"
        )
    if added is not None and not added.drafts:
        raise CompatError(
            f"the server at {base} has speculative decoding but drafted nothing during the run "
            "(vllm:spec_decode_num_drafts_total did not increase): check its speculative config"
        )
