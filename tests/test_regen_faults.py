"""Which failures of a regenerate-responses request are the conversation's, which are a request
the server did not answer (judged by the liveness probe) and which end the run
(regenerate/loop.py, regenerate/state.py), on the messages upstream's ``_post_chat`` raises
(0.8.1/0.9.0 ``cli/regenerate_responses.py:285``: ``HTTP <status> from <url>: <body>``)."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from speculators_qwen_compat.regenerate import state as regen_state
from speculators_qwen_compat.regenerate.loop import (
    Refused,
    Unanswered,
    _post,
    fault_of,
    unanswered_reason,
)
from speculators_qwen_compat.regenerate.tally import BUG, ERROR_LIMIT

pytestmark = pytest.mark.pure
URL = "http://127.0.0.1:8000/v1/chat/completions"
TEMPLATE_400 = (
    f'HTTP 400 from {URL}: {{"error":{{"message":"System message must be at the beginning.",'
    '"type":"BadRequestError","param":null,"code":400}}'
)


def test_a_refusal_is_the_conversations_with_the_servers_words() -> None:
    async def refuse(payload: dict) -> dict:
        raise RuntimeError(TEMPLATE_400)  # the type does not matter, the status does

    with pytest.raises(Refused, match=r"^System message must be at the beginning\.$"):
        asyncio.run(_post(refuse, {}))
    assert fault_of(RuntimeError(TEMPLATE_400)) is None


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (RuntimeError(f"HTTP 503 from {URL}: overloaded"), "HTTP 503 after every retry"),
        (RuntimeError(f"HTTP 429 from {URL}: slow down"), "HTTP 429 after every retry"),
        (aiohttp.ServerDisconnectedError(), "ServerDisconnectedError after every retry"),
        (ConnectionRefusedError(111, "refused"), "ConnectionRefusedError after every retry"),
        (TimeoutError(), "no answer within --request-timeout 3600 s, after every retry"),
    ],
)
def test_unanswered_requests_are_judged_by_the_probe(exc: BaseException, reason: str) -> None:
    async def fail(payload: dict) -> dict:
        raise exc

    assert unanswered_reason(exc) == reason and fault_of(exc) is None
    with pytest.raises(Unanswered, match=reason):
        asyncio.run(_post(fail, {}))


@pytest.mark.parametrize("status", [401, 403, 404, 405])
def test_a_misconfigured_endpoint_ends_the_run(status: int) -> None:
    exc = RuntimeError(f"HTTP {status} from {URL}: no")
    assert fault_of(exc) and unanswered_reason(exc) is None


def test_a_bug_is_neither_and_the_limit_ends_the_run() -> None:
    assert fault_of(KeyError("choices")) is None and unanswered_reason(KeyError("x")) is None
    state = regen_state.open_run()
    try:
        for _ in range(ERROR_LIMIT):
            regen_state.count_error(KeyError("choices"))
        assert state.stop is None and state.tally.failed[BUG] == ERROR_LIMIT
        regen_state.count_error(KeyError("choices"))
        assert state.stop is not None and "KeyError" in state.stop and not state.server_fault
        assert state.wake.is_set()
    finally:
        regen_state.close_run()
