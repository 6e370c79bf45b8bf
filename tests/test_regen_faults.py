"""Which failures of a regenerate-responses request are the conversation's and which end the run
(data/regen_loop.py, data/regen_state.py), on the messages upstream's ``_post_chat`` raises
(0.8.1/0.9.0 ``cli/regenerate_responses.py:285``: ``HTTP <status> from <url>: <body>``)."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from speculators_qwen_compat.data import regen_state
from speculators_qwen_compat.data.regen_loop import Refused, _post, fault_of
from speculators_qwen_compat.data.regen_tally import ERROR_LIMIT

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
    "exc",
    [
        RuntimeError(f"HTTP 503 from {URL}: overloaded"),
        RuntimeError(f"HTTP 404 from {URL}: Not Found"),
        aiohttp.ServerDisconnectedError(),
        ConnectionRefusedError(111, "refused"),
        TimeoutError(),
    ],
)
def test_server_faults_end_the_run(exc: BaseException) -> None:
    assert fault_of(exc)


def test_a_bug_is_neither_and_the_limit_ends_the_run() -> None:
    assert fault_of(KeyError("choices")) is None
    state = regen_state.open_run()
    try:
        for _ in range(ERROR_LIMIT):
            regen_state.count_error(KeyError("choices"))
        assert state.stop is None
        regen_state.count_error(KeyError("choices"))
        assert state.stop is not None and "KeyError" in state.stop and not state.server_fault
        assert state.wake.is_set()
    finally:
        regen_state.close_run()
