"""regenerate-responses' loop and files against a fake post function (issue 33, items 1-9):
pairing by tool name, both reasoning keys, cut thinking kept, one conversation's 5xx with the
server alive or dead, the consecutive-failure limit, the read timeout, a server without a tool
parser, the template check judging only what is sent (on a refused first prompt), the torn
line, the lock and a resume that adds nothing.

Rows are built by upstream's own ``_sample_from_response`` and tool answers by its
``_tool_result_message`` (speculators 0.8+); the oracle is the fake server's own log of what it
was sent and the bytes on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import RENDERS
from transformers import AutoTokenizer

from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.regenerate import loop, output, state
from speculators_qwen_compat.regenerate import plan as plan_module
from speculators_qwen_compat.regenerate.plan import plan_row
from speculators_qwen_compat.regenerate.tally import BUG, ERROR_LIMIT, RegenTally

pytestmark = pytest.mark.skipif(not RENDERS, reason="regenerate-responses is 0.8+")
URL = "http://127.0.0.1:9/v1/chat/completions"


def upstream() -> Any:
    import importlib

    return importlib.import_module("speculators.cli.regenerate_responses")


def reply(content: str = "", calls: list | None = None, reasoning: str = "", finish: str = "stop",
          prompt: int = 5, completion: int = 3) -> dict[str, Any]:  # fmt: skip
    message: dict[str, Any] = {"role": "assistant", "content": content, "reasoning": reasoning}
    if calls:
        message["tool_calls"] = calls
    return {
        "prompt_token_ids": list(range(prompt)),
        "choices": [
            {
                "message": message,
                "finish_reason": finish,
                "token_ids": list(range(100, 100 + completion)),
            }
        ],
    }


def tool_call(name: str, call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


class FakeServer:
    """Answers each request from ``answers`` in turn (a dict, or an exception to raise) and
    keeps every payload it was sent."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.sent: list[dict[str, Any]] = []

    async def __call__(self, payload: dict[str, Any]) -> dict[str, Any]:
        self.sent.append(json.loads(json.dumps(payload)))
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def run(row: dict[str, Any], server: FakeServer, *, alive: bool = True, tools: Any = None,
        max_tokens: int = 1000,
        tokenizer: Any = None) -> tuple[list[dict[str, Any]], Any]:  # fmt: skip
    """One conversation through ``loop.regenerate``: (its rows, what it returned or raised)."""
    module = upstream()
    plan, found_tools = plan_row(row, tokenizer=tokenizer, result_names=module._tool_result_names)
    item = {"turns": plan, "tools": tools or found_tools, "primary_id": "c", "idx": 0}
    samples: list[dict[str, Any]] = []

    async def probe() -> bool:
        return alive

    async def go() -> Any:
        return await loop.regenerate(
            server, item, model="m", max_tokens=max_tokens, sampling_params={},
            samples=samples, sample_from_response=module._sample_from_response,
            tool_result_message=module._tool_result_message,
            sample_args={"detokenize": lambda ids: "", "conv_id": "c", "idx": 0,
                         "endpoint": URL},
            overrides={}, probe=probe,
        )  # fmt: skip

    try:
        outcome: Any = asyncio.run(asyncio.wait_for(go(), 5))
    except Exception as exc:
        outcome = exc
    return samples, outcome


@pytest.fixture
def run_state() -> Any:
    opened = state.open_run()
    opened.endpoint = URL
    yield opened
    state.close_run()


AGENTIC = {
    "messages": [
        {"role": "user", "content": "weather and news?"},
        {"role": "assistant", "content": "", "tool_calls": [tool_call("search", "a"),
                                                           tool_call("get_weather", "b")]},
        {"role": "tool", "tool_call_id": "a", "content": "NEWS"},
        {"role": "tool", "tool_call_id": "b", "content": "SUNNY"},
        {"role": "assistant", "content": "done"},
    ],
    "tools": [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
              for n in ("search", "get_weather")],
}  # fmt: skip


def test_results_paired_by_name_and_reasoning_sent_under_both_keys(run_state: Any) -> None:
    server = FakeServer(
        reply(calls=[tool_call("get_weather", "x1")], reasoning="need weather"),
        reply("It is sunny.", reasoning="got it"),
    )
    samples, outcome = run(AGENTIC, server)
    assert outcome is False and len(samples) == 2
    second = server.sent[1]["messages"]
    assert second[-1] == {"role": "tool", "content": "SUNNY", "tool_call_id": "x1"}
    assistant = second[-2]
    assert assistant["reasoning"] == assistant["reasoning_content"] == "need weather"
    assert run_state.tally.regenerated == 1 and run_state.tally.rows_out == 2


def test_cut_thinking_is_a_row_counted_cut_short(run_state: Any) -> None:
    server = FakeServer(reply(reasoning="still going", finish="length", completion=7))
    samples, outcome = run({"messages": [{"role": "user", "content": "q"}]}, server)
    assert outcome is True and len(samples) == 1
    assert samples[0]["loss_mask"].count(1) == 7  # every sampled token
    assert dict(run_state.tally.cut_short) == {loop.STILL_THINKING: 1}


def test_one_conversations_504_with_the_server_alive_is_counted_and_the_run_goes_on(
    run_state: Any,
) -> None:
    server = FakeServer(RuntimeError(f"HTTP 504 from {URL}: gateway timeout"))
    samples, outcome = run({"messages": [{"role": "user", "content": "q"}]}, server)
    assert isinstance(outcome, loop.NothingRegenerated) and not samples
    assert dict(run_state.tally.failed) == {"HTTP 504 after every retry": 1}
    assert run_state.stop is None


def test_a_504_with_the_server_dead_stops_the_run(run_state: Any) -> None:
    server = FakeServer(RuntimeError(f"HTTP 504 from {URL}: gateway timeout"))
    _, outcome = run({"messages": [{"role": "user", "content": "q"}]}, server, alive=False)
    assert isinstance(outcome, asyncio.TimeoutError)  # waits to be cancelled with the run
    assert run_state.server_fault and "HTTP 504" in run_state.stop
    assert "/v1/models" in run_state.stop and not run_state.tally.failed


def test_consecutive_failures_past_the_limit_stop_the_run(run_state: Any) -> None:
    limit = state.SETTINGS.max_consecutive_failures
    for index in range(limit):
        assert run_state.stop is None, index
        run({"messages": [{"role": "user", "content": "q"}]},
            FakeServer(RuntimeError(f"HTTP 502 from {URL}: bad gateway")))  # fmt: skip
    assert run_state.stop and "--max-consecutive-failures" in run_state.stop
    assert sum(run_state.tally.failed.values()) == limit


def test_an_answered_conversation_resets_the_consecutive_count(run_state: Any) -> None:
    for _ in range(3):
        run({"messages": [{"role": "user", "content": "q"}]},
            FakeServer(RuntimeError(f"HTTP 500 from {URL}: oops")))  # fmt: skip
        run({"messages": [{"role": "user", "content": "q"}]}, FakeServer(reply("Ok.")))
    assert run_state.stop is None and run_state.consecutive == 0


def test_an_error_of_the_template_check_itself_is_a_counted_bug_under_the_error_limit(
    run_state: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tokenizer that breaks during the template check of a refused first prompt (not a data
    problem) fails the conversation counted like any other bug, and past the error limit stops
    the run."""

    def broken(self: Any) -> None:
        raise RuntimeError("the tokenizer broke")

    def refusing() -> FakeServer:
        return FakeServer(RuntimeError(f'HTTP 400 from {URL}: {{"message": "refused"}}'))

    monkeypatch.setattr(plan_module.Plan, "check", broken)
    question = {"messages": [{"role": "user", "content": "q"}]}
    samples, outcome = run(question, refusing(), tokenizer=object())
    assert isinstance(outcome, RuntimeError) and not samples
    assert run_state.tally.errors == 1 and dict(run_state.tally.failed) == {BUG: 1}
    run_state.tally.conversations_in = 1
    assert run_state.tally.counted() == 1  # the counts add up
    for _ in range(ERROR_LIMIT):
        run(question, refusing(), tokenizer=object())
    assert run_state.stop and "the tokenizer broke" in run_state.stop


def test_an_answered_conversation_is_never_rendered_here(
    run_state: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The template check costs nothing on the good path: the server's template judged it."""

    def broken(self: Any) -> None:
        raise AssertionError("rendered although the server answered")

    monkeypatch.setattr(plan_module.Plan, "check", broken)
    samples, outcome = run({"messages": [{"role": "user", "content": "q"}]},
                           FakeServer(reply("Ok.")), tokenizer=object())  # fmt: skip
    assert outcome is False and len(samples) == 1 and run_state.tally.errors == 0


def test_the_request_timeout_bounds_each_try_and_is_named(run_state: Any) -> None:
    from speculators_qwen_compat.fixes.regenerate.regen_run import timed

    async def never(*args: Any, **kwargs: Any) -> dict:
        await asyncio.sleep(60)
        return {}

    post = upstream().with_retries(timed(never))
    state.SETTINGS.request_timeout = 0.2
    try:
        _, outcome = run(
            {"messages": [{"role": "user", "content": "q"}]},
            _Wrapped(lambda payload: post(None, URL, payload, max_retries=1)),
        )
    finally:
        state.SETTINGS.request_timeout = state.DEFAULT_REQUEST_TIMEOUT
    assert isinstance(outcome, loop.NothingRegenerated)
    assert dict(run_state.tally.failed) == {
        "no answer within --request-timeout 0.2 s, after every retry": 1
    }


class _Wrapped(FakeServer):
    def __init__(self, post: Any) -> None:
        super().__init__()
        self.post = post

    async def __call__(self, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.post(payload)


def test_a_server_without_a_tool_parser_fails_the_run_naming_the_flags(run_state: Any) -> None:
    refusal = (
        f'HTTP 400 from {URL}: {{"error":{{"message":"\\"auto\\" tool choice requires '
        '--enable-auto-tool-choice and --tool-call-parser to be set","code":400}}'
    )
    run(AGENTIC, FakeServer(RuntimeError(refusal)))
    assert run_state.stop and loop.TOOL_FLAGS in run_state.stop


def test_the_same_refusal_for_every_tool_conversation_is_the_servers(run_state: Any) -> None:
    refusal = f'HTTP 400 from {URL}: {{"error":{{"message":"tools are not supported"}}}}'
    for _ in range(loop.ALIKE_REFUSALS - 1):
        run(AGENTIC, FakeServer(RuntimeError(refusal)))
        assert run_state.stop is None
    run(AGENTIC, FakeServer(RuntimeError(refusal)))
    assert run_state.stop and "tools are not supported" in run_state.stop
    assert sum(run_state.tally.failed.values()) == loop.ALIKE_REFUSALS


def test_the_template_check_judges_only_what_is_sent(qwen36_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(qwen36_dir)
    zero = {"messages": [{"role": "user", "content": "q"},
                         {"role": "assistant", "content": "OK.", "weight": 0}]}  # fmt: skip
    bad_arguments = {"messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{not json"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "R"},
    ]}  # fmt: skip
    for row in (zero, bad_arguments):
        plan, _ = plan_row(row, tokenizer=tokenizer)
        assert plan.check() is None and len(plan) == 1
    plan, _ = plan_row(bad_arguments)
    assert [(r.name, r.content) for r in plan[0].results] == [("f", "R")]
    fallback = {"messages": [{"role": "system", "content": "s"}], "prompt": "from the field"}
    plan, _ = plan_row(fallback, prompt_field="prompt")
    assert plan[0].lead == [{"role": "user", "content": "from the field"}]


def test_the_template_check_renders_the_first_prompt_once(
    qwen36_dir: Path, monkeypatch: Any
) -> None:
    """The check runs on a refusal only and renders what was refused: the first prompt, once,
    as text, whatever the conversation's length."""
    tokenizer = AutoTokenizer.from_pretrained(qwen36_dir)
    renders: list[int] = []
    original = type(tokenizer).apply_chat_template

    def counted(self: Any, conversation: Any, *args: Any, **kwargs: Any) -> Any:
        renders.append(len(conversation))
        return original(self, conversation, *args, **kwargs)

    monkeypatch.setattr(type(tokenizer), "apply_chat_template", counted)
    turns = []
    for index in range(40):
        turns += [{"role": "user", "content": f"q{index}"}, {"role": "assistant", "content": "a"}]
    late = [*turns[:20], {"role": "system", "content": "late"}, *turns[20:]]
    plan, _ = plan_row({"messages": late}, tokenizer=tokenizer)
    assert plan.check() is None and len(plan) == 40  # later prompts are the server's to judge
    assert renders == [1], renders
    assert plan.check() is None and renders == [1]  # once
    renders.clear()
    first = [{"role": "user", "content": "q"}, {"role": "system", "content": "late"}, *turns]
    plan, _ = plan_row({"messages": first}, tokenizer=tokenizer)
    assert plan.check() == "System message must be at the beginning."
    assert renders == [2], renders


def test_a_refused_first_prompt_is_skipped_when_the_template_refuses_it_too(
    run_state: Any, qwen36_dir: Path
) -> None:
    """The server's 400 on a first prompt the target's template also rejects is the data's:
    skipped with the template's words, no failure, no error record; one the template renders
    is the server's refusal, failed with the server's words."""
    tokenizer = AutoTokenizer.from_pretrained(qwen36_dir)
    words = "System message must be at the beginning."

    def refusing() -> FakeServer:
        return FakeServer(RuntimeError(f'HTTP 400 from {URL}: {{"message": "{words}"}}'))

    late = {"messages": [{"role": "user", "content": "q"}, {"role": "system", "content": "s"}]}
    server = refusing()
    samples, outcome = run(late, server, tokenizer=tokenizer)
    assert not samples and outcome is False and len(server.sent) == 1
    assert dict(run_state.tally.skipped) == {words: 1}
    assert not run_state.tally.failed and run_state.tally.errors == 0
    fine = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]}
    samples, outcome = run(fine, refusing(), tokenizer=tokenizer)
    assert not samples and isinstance(outcome, loop.NothingRegenerated)
    assert sum(run_state.tally.failed.values()) == 1 and dict(run_state.tally.skipped) == {words: 1}
    assert words in next(iter(run_state.tally.failed))


def test_a_later_refusal_cuts_even_where_the_first_prompt_breaks_the_template(
    run_state: Any, qwen36_dir: Path
) -> None:
    """A server that answered the first prompt (a more lenient template) has the last word on
    it: a later refusal cuts the conversation with the server's words, its row kept, never a
    skip of a conversation with rows written."""
    tokenizer = AutoTokenizer.from_pretrained(qwen36_dir)
    row = {"messages": [{"role": "user", "content": "q"}, {"role": "system", "content": "s"},
                        {"role": "assistant", "content": "a"},
                        {"role": "user", "content": "q2"}]}  # fmt: skip
    server = FakeServer(
        reply("Ok."), RuntimeError(f'HTTP 400 from {URL}: {{"message": "too long now"}}')
    )
    samples, outcome = run(row, server, tokenizer=tokenizer)
    assert len(samples) == 1 and outcome is True and len(server.sent) == 2
    assert not run_state.tally.skipped and not run_state.tally.failed
    assert list(run_state.tally.cut_short) == ["too long now"]


def test_tool_conversations_the_template_skips_never_read_as_a_missing_tool_parser(
    run_state: Any, qwen36_dir: Path
) -> None:
    """Alike refusals of tool conversations stop the run as a server without a tool parser;
    ones the target's template refuses too are the data's, skipped, and do not add to them."""
    tokenizer = AutoTokenizer.from_pretrained(qwen36_dir)
    words = "System message must be at the beginning."
    row = {**AGENTIC, "messages": [AGENTIC["messages"][0], {"role": "system", "content": "s"}]}
    for _ in range(loop.ALIKE_REFUSALS + 1):
        server = FakeServer(RuntimeError(f'HTTP 400 from {URL}: {{"message": "{words}"}}'))
        samples, outcome = run(row, server, tokenizer=tokenizer)
        assert not samples and outcome is False
    assert run_state.stop is None
    assert dict(run_state.tally.skipped) == {words: loop.ALIKE_REFUSALS + 1}


def test_a_torn_last_line_is_counted_kept_aside_and_cut(tmp_path: Path) -> None:
    final = tmp_path / "out.jsonl"
    rows = b'{"id": "a_gen0", "primary_id": "a"}\n{"id": "b_gen0", "primary_id": "b"}\n'
    torn = b'{"id": "c_gen0", "prim'
    final.write_bytes(rows + torn)
    taken = output.take(final, resume=True)
    try:
        assert taken.torn == 1 and taken.from_final
        assert taken.partial.read_bytes() == rows  # the complete rows, not rewritten
        assert output.torn_path(final).read_bytes() == torn + b"\n"
    finally:
        taken.release()


A_ROW, B_ROW = b'{"id": "a_gen0", "primary_id": "a"}\n', b'{"id": "b_gen0", "primary_id": "b"}\n'
C_ROWS = b'{"id": "c_gen0", "primary_id": "c"}\n{"id": "c_gen1", "primary_id": "c"}\n'
#: case -> (rows kept, rows that go aside with the tail, the torn tail). A conversation is one
#: write, so the complete rows just before a torn tail that may belong to it were cut by the
#: same kill: they go aside with it (counted), so upstream's load_seen does not count that
#: conversation done and it is regenerated whole. Rows of other conversations stay.
TORN_TAILS = {
    # the tail names its conversation (c): c's complete rows go with it
    "named": (A_ROW + B_ROW, C_ROWS, b'{"id": "c_gen2", "primary_id": "c", "inp'),
    # every write ends in a newline: a last row without one is a write cut right after a row's
    # closing brace (c's gen2 never written)
    "whole row, no newline": (A_ROW, C_ROWS.split(b"\n")[0] + b"\n",
                              b'{"id": "c_gen1", "primary_id": "c"}'),
    # the bytes do not say whose row it is: it may be the same write as the conversation just
    # before it, which goes with it; earlier conversations stay
    "too short to name one": (A_ROW + B_ROW, C_ROWS, b'{"id": "c_ge'),
}  # fmt: skip


@pytest.mark.parametrize("case", TORN_TAILS)
def test_a_torn_tail_takes_the_rows_of_its_conversation_aside_with_it(
    case: str, tmp_path: Path
) -> None:
    kept, aside, torn = TORN_TAILS[case]
    final = tmp_path / "out.jsonl"
    final.write_bytes(kept + aside + torn)
    taken = output.take(final, resume=True)
    try:
        assert taken.torn == aside.count(b"\n") + 1
        assert taken.partial.read_bytes() == kept
        assert output.torn_path(final).read_bytes() == aside + torn + b"\n"
        seen = {line.split(b'"primary_id": "')[1][:1].decode() for line in kept.splitlines()}
        assert upstream().load_seen(str(taken.partial)) == seen
    finally:
        taken.release()


def test_an_earlier_torn_file_is_kept_as_it_is(tmp_path: Path) -> None:
    """A second torn tail goes to a file of its own (``out.torn.1.jsonl``): the torn file an
    earlier resume left is neither replaced nor appended to."""
    final = tmp_path / "out.jsonl"
    earlier = b'{"id": "z_gen0", "prim\n'
    output.torn_path(final).write_bytes(earlier)
    rows = b'{"id": "a_gen0", "primary_id": "a"}\n'
    torn = b'{"id": "b_gen0", "prim'
    final.write_bytes(rows + torn)
    taken = output.take(final, resume=True)
    taken.release()
    assert taken.torn == 1 and taken.partial.read_bytes() == rows
    assert output.torn_path(final).read_bytes() == earlier
    assert (tmp_path / "out.torn.1.jsonl").read_bytes() == torn + b"\n"


def test_earlier_rows_resume_cannot_read_are_put_back_under_their_own_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Upstream's ``load_seen`` cannot read the earlier output (a line that is not UTF-8): the
    run is one line and the earlier output is back under its own name, byte for byte."""
    from speculators_qwen_compat.regenerate import run as regen_run

    final = tmp_path / "out.jsonl"
    earlier = b'{"id": "a_gen0", "primary_id": "a"}\n{"id": "b_gen0", "text": "\xff"}\n'
    final.write_bytes(earlier)

    async def upstream_run(*, endpoint: str, model: str, dataset_name: str, outfile: str,
                           resume: bool, max_tokens: int, limit: Any) -> None:  # fmt: skip
        raise AssertionError("upstream must not run")

    kwargs = {"endpoint": URL, "model": "m", "dataset_name": "d.jsonl", "outfile": str(final),
              "resume": True, "max_tokens": 10, "limit": None}  # fmt: skip
    with pytest.raises(SystemExit) as ended:
        asyncio.run(regen_run.guarded_run(upstream_run, (), kwargs, upstream()))
    assert ended.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"speculators_qwen_compat: error: cannot read the earlier rows in {final}"
    ), err
    assert "UnicodeDecodeError" in err[0] and f"{final} is back under its own name" in err[0]
    assert final.read_bytes() == earlier and not output.partial_path(final).exists()


def test_one_writer_per_output(tmp_path: Path) -> None:
    final = tmp_path / "out.jsonl"
    first = output.take(final, resume=False)
    try:
        for resume in (True, False):
            with pytest.raises(CompatError, match="another regenerate-responses run is writing"):
                output.take(final, resume=resume)
    finally:
        first.release()
    second = output.take(final, resume=True)  # the lock went with the first run
    second.release()


def test_a_resume_that_adds_nothing_leaves_the_earlier_output_byte_identical(
    tmp_path: Path,
) -> None:
    final = tmp_path / "out.jsonl"
    earlier = b'{"id": "a_gen0", "primary_id": "a"}\n'
    final.write_bytes(earlier)
    taken = output.take(final, resume=True)
    assert not final.exists() and not taken.added()
    assert output.restore(taken) == final
    taken.release()
    assert final.read_bytes() == earlier and not taken.partial.exists()


def test_every_conversation_is_counted_once() -> None:
    tally = RegenTally(conversations_in=9, regenerated=2, resumed=1, not_reached=2)
    tally.cut_short["c"] += 1
    tally.skipped["s"] += 1
    tally.failed["HTTP 504 after every retry"] += 2
    assert tally.counted() == tally.conversations_in
    line = tally.summary()
    assert "1 already in the output (--resume)" in line and "2 not reached (run stopped)" in line


class NoProgress:
    def set_postfix(self, *args: Any, **kwargs: Any) -> None: ...

    def update(self, n: int) -> None: ...


class Together(FakeServer):
    """Answers nothing until ``waiting`` requests are waiting, then each in the order they came:
    two workers' replies arrive at the same moment."""

    def __init__(self, *answers: Any, waiting: int = 2) -> None:
        super().__init__(*answers)
        self.waiting, self.gate = waiting, asyncio.Event()

    async def __call__(self, payload: dict[str, Any]) -> dict[str, Any]:
        answer = await super().__call__(payload)  # taken in the order the requests came
        came = len(self.sent)
        if came >= self.waiting:
            self.gate.set()
        await self.gate.wait()
        for _ in range(came):  # the first to come is answered first (the last did not wait)
            await asyncio.sleep(0)
        return answer


class FullDisk:
    """Upstream's errors file on a disk that is full: every flush fails with ENOSPC, as a text
    file's does once its buffer reaches the disk."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        import errno

        raise OSError(errno.ENOSPC, "No space left on device")


def through_upstreams_worker(server: FakeServer, tmp_path: Path, rows: list[dict[str, Any]],
                             monkeypatch: pytest.MonkeyPatch, *, workers: int = 1,
                             errors_full: bool = False) -> Any:  # fmt: skip
    """A run (regenerate/run.py) whose ``_run`` feeds ``rows`` to upstream's own ``_worker``
    (``workers`` of them at once, as ``--concurrency``) with the files opened as upstream's
    ``_run`` opens them (0.9.0 :769), asking ``server``; ``errors_full``: writing the errors
    file fails too (the same full disk)."""
    module = upstream()
    monkeypatch.setattr(
        module, "_post_chat", lambda session, endpoint, payload, **kw: server(payload)
    )
    dataset = tmp_path / "data.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))

    async def upstream_run(*, endpoint: str, model: str, dataset_name: str, outfile: str,
                           resume: bool, max_tokens: int, limit: Any) -> None:  # fmt: skip
        queue: asyncio.Queue = asyncio.Queue()
        for index, row in enumerate(rows):
            plan, tools = plan_row(row, result_names=module._tool_result_names)
            await queue.put({"turns": plan, "tools": tools, "primary_id": f"c{index}",
                             "idx": index})  # fmt: skip
        for _ in range(workers):
            await queue.put(None)
        errors = output.errors_path(Path(outfile))
        with Path(outfile).open("a", encoding="utf-8") as out_fh, errors.open("a") as err_fh:
            stats = dict.fromkeys(("ok", "errors", "truncated", "requests"), 0)
            stats.update(completion_tokens=0, total_request_s=0.0, start_time=0.0)
            await asyncio.gather(*(module._worker(
                None, queue, model=model, max_tokens=max_tokens, endpoint=endpoint,
                sampling_params={}, max_retries=0, out_fh=out_fh,
                err_fh=FullDisk() if errors_full else err_fh,
                progress=NoProgress(), stats=stats, detokenize=lambda ids: "",
            ) for _ in range(workers)))  # fmt: skip

    from speculators_qwen_compat.regenerate import run as regen_run

    kwargs = {"endpoint": URL, "model": "m", "dataset_name": str(dataset),
              "outfile": str(tmp_path / "out.jsonl"), "resume": False, "max_tokens": 10**6,
              "limit": None}  # fmt: skip

    async def exit_code() -> Any:
        try:
            await regen_run.guarded_run(upstream_run, (), kwargs, module)
        except SystemExit as exc:
            return exc.code
        return 0

    return asyncio.run(asyncio.wait_for(exit_code(), 20))


class FileSizeLimit:
    """Writes past ``limit`` bytes of one file fail (RLIMIT_FSIZE: a real short write, then
    EFBIG), as a full disk's do with ENOSPC."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def __enter__(self) -> FileSizeLimit:
        import resource
        import signal

        self.soft, self.hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        self.handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (self.limit, self.hard))
        return self

    def __exit__(self, *exc: object) -> None:
        import resource
        import signal

        resource.setrlimit(resource.RLIMIT_FSIZE, (self.soft, self.hard))
        signal.signal(signal.SIGXFSZ, self.handler)


@pytest.mark.parametrize("errors_full", [False, True], ids=["rows", "rows and errors file"])
def test_a_full_disk_stops_the_run_with_one_line_and_nothing_half_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    errors_full: bool,
) -> None:  # fmt: skip
    """The output's file system refuses the second conversation's rows part way: the run stops
    with one line saying which file and how to go on, exit 1, and a report; the file holds the
    first conversation whole and nothing of the second; the second is not counted regenerated.
    On a real full disk upstream's worker then fails to write the errors file too (its error
    ends upstream's ``_run``): the line is still the full disk's, not that second error's."""
    limit = 64 * 1024
    server = FakeServer(reply("small", completion=3), reply("huge", completion=limit))
    question = {"messages": [{"role": "user", "content": "q"}]}
    with FileSizeLimit(limit):
        code = through_upstreams_worker(
            server, tmp_path, [question, question], monkeypatch, errors_full=errors_full
        )
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    partial = tmp_path / "out.partial.jsonl"
    assert len(err) == 1 and err[0].startswith(
        f"speculators_qwen_compat: error: cannot write {partial}: "
    ), err
    assert f"the rows written are in {partial}" in err[0]
    assert "rerun the same command with --resume" in err[0] and "once there is room" in err[0]
    written = [json.loads(line) for line in partial.read_bytes().splitlines(keepends=True)
               if line.endswith(b"\n")]  # fmt: skip
    assert partial.read_bytes().endswith(b"\n") and {row["primary_id"] for row in written} == {"c0"}
    report = json.loads((tmp_path / "out.jsonl.report.json").read_text())
    assert report["exit_code"] == 1 and report["regenerated"] == 1 and report["rows_out"] == 1
    assert report["not_reached"] == 1  # the second: asked, but its rows are not in the file
    assert report["output"] == str(partial)


def test_a_conversation_is_counted_only_once_its_rows_are_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two workers: c0's rows hit the full disk, and c1's reply arrives before the workers are
    cancelled; upstream's worker writes c1's rows into a writer that has failed. Neither is in
    the file, so neither is counted: the line, the report and the file agree."""
    limit = 64 * 1024
    server = Together(reply("huge", completion=limit), reply("small", completion=3))
    question = {"messages": [{"role": "user", "content": "q"}]}
    with FileSizeLimit(limit):
        code = through_upstreams_worker(
            server, tmp_path, [question, question], monkeypatch, workers=2
        )
    assert code == 1 and len(server.sent) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "regenerated 0 of 2 conversations (0 rows)" in err[0], err
    assert "no row was written" in err[0] and "2 not reached" in err[0]
    partial = tmp_path / "out.partial.jsonl"
    assert not partial.exists() or partial.read_bytes() == b""
    report = json.loads((tmp_path / "out.jsonl.report.json").read_text())
    assert report["regenerated"] == 0 and report["rows_out"] == 0 and report["not_reached"] == 2


def test_a_report_that_cannot_be_written_is_one_line_and_the_last_good_report_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import errno

    from speculators_qwen_compat.regenerate import run as regen_run

    report = tmp_path / "out.jsonl.report.json"
    report.write_text('{"exit_code": 0, "regenerated": 99}\n')  # an earlier run's

    calls: list[bool] = []
    real_write = regen_run.write_report

    def full(*args: Any, **kwargs: Any) -> Any:
        calls.append(True)
        if len(calls) == 1:  # the report the run writes when it starts: the disk fills later
            return real_write(*args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(regen_run, "write_report", full)
    question = {"messages": [{"role": "user", "content": "q"}]}
    code = through_upstreams_worker(FakeServer(reply("Ok.")), tmp_path, [question], monkeypatch)
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("speculators_qwen_compat: error: cannot write ")
    assert "No space left on device" in err[0] and "written when the run started" in err[0]
    # the last good report stays: this run's, as written when it started (its settings, for
    # the next --resume); the earlier run's is set aside, never deleted
    kept = json.loads(report.read_text())
    assert kept["exit_code"] is None and kept["settings"]["model"] == "m"
    assert json.loads((tmp_path / "out.jsonl.report.1.json").read_text())["regenerated"] == 99
    assert (tmp_path / "out.jsonl").exists()  # the rows themselves were published


def interrupt(final: Path, upstream_run: Any, *, resume: bool = True,
              again: float | None = None) -> float:  # fmt: skip
    """A run of ``upstream_run`` interrupted as asyncio.run does on Ctrl-C (its main task
    cancelled) after 0.5 s, and ``again`` s later a second time; how long it took to end."""
    import time

    from speculators_qwen_compat.regenerate import run as regen_run

    kwargs = {"endpoint": URL, "model": "m", "dataset_name": "none.jsonl",
              "outfile": str(final), "resume": resume, "max_tokens": 10, "limit": None}  # fmt: skip

    async def interrupted() -> None:
        main = asyncio.current_task()
        asyncio.get_running_loop().call_later(0.5, main.cancel)
        if again is not None:
            asyncio.get_running_loop().call_later(0.5 + again, main.cancel)
        await regen_run.guarded_run(upstream_run, (), kwargs, upstream())

    start = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(interrupted())
    return time.monotonic() - start


def test_ctrl_c_during_a_resume_leaves_the_earlier_output_under_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    final = tmp_path / "out.jsonl"
    earlier = b'{"id": "a_gen0", "primary_id": "a"}\n'
    final.write_bytes(earlier)
    during: list[bool] = []

    async def upstream_run(*, endpoint: str, model: str, dataset_name: str, outfile: str,
                           resume: bool, max_tokens: int, limit: Any) -> None:  # fmt: skip
        during.append(final.exists())
        await asyncio.Event().wait()  # a long run

    interrupt(final, upstream_run)
    assert during == [False]  # taken: the run worked on the partial file
    assert final.read_bytes() == earlier and not output.partial_path(final).exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"speculators_qwen_compat: error: interrupted (Ctrl-C); nothing was added, {final} is "
        "as it was; rerun the same command with --resume to go on; regenerated 0 of "
    ), err
    report = json.loads((tmp_path / "out.jsonl.report.json").read_text())
    assert report["exit_code"] == 130 and report["complete"] is False
    assert report["output"] == str(final)


def test_ctrl_c_says_where_the_rows_are_and_a_second_one_ends_the_wait(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Upstream's run wrote a row, then does not end when cancelled (a worker that keeps
    going): the run waits for it, but a second Ctrl-C ends that wait at once; the rows stay in
    the partial file and the one line says so and how to go on."""
    final = tmp_path / "out.jsonl"
    row = b'{"id": "a_gen0", "primary_id": "a"}\n'

    async def upstream_run(*, endpoint: str, model: str, dataset_name: str, outfile: str,
                           resume: bool, max_tokens: int, limit: Any) -> None:  # fmt: skip
        with Path(outfile).open("ab") as out:
            out.write(row)
        with contextlib.suppress(asyncio.CancelledError):  # deaf to the run's cancel
            await asyncio.sleep(60)
        await asyncio.sleep(60)  # until asyncio.run cancels what is left, once the run ended

    took = interrupt(final, upstream_run, resume=False, again=0.3)
    assert took < 3  # not the 5 s the run would wait for its workers
    partial = output.partial_path(final)
    assert partial.read_bytes() == row and not final.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"speculators_qwen_compat: error: interrupted (Ctrl-C); the rows are in {partial} "
        f"(partial); rerun the same command with --resume to finish into {final}; regenerated "
    ), err
    report = json.loads((tmp_path / "out.jsonl.report.json").read_text())
    assert report["exit_code"] == 130 and report["output"] == str(partial)


def test_ctrl_c_while_the_run_stops_on_a_fault_is_not_swallowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server fault stops the run: it cancels upstream's run and waits for it to end (a
    worker finishing slowly). A Ctrl-C in that wait is the user's, not the cancellation the
    run asked for: the run ends as interrupted (exit 130 in the report, the Ctrl-C line), not
    as the fault's exit 1 with the Ctrl-C lost."""
    final = tmp_path / "out.jsonl"

    async def upstream_run(*, endpoint: str, model: str, dataset_name: str, outfile: str,
                           resume: bool, max_tokens: int, limit: Any) -> None:  # fmt: skip
        state.end_run("the server died", server_fault=True)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(5)  # still ending when Ctrl-C comes (0.5 s)
            raise

    interrupt(final, upstream_run, resume=False)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "speculators_qwen_compat: error: interrupted (Ctrl-C); no row was written"
    ), err
    report = json.loads((tmp_path / "out.jsonl.report.json").read_text())
    assert report["exit_code"] == 130 and report["complete"] is False


def test_a_first_prompt_reaching_max_tokens_is_warned_by_the_servers_count(run_state: Any) -> None:
    """Nothing is tokenized here (the template check renders text, on a refusal only): the
    prompt's length is the server's, from its answer (``prompt_token_ids``), counted once per
    conversation."""
    server = FakeServer(reply("Ok.", prompt=1200), reply("Ok.", prompt=1300))
    row = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                        {"role": "user", "content": "c"}]}  # fmt: skip
    samples, outcome = run(row, server, max_tokens=1000)
    assert len(samples) == 1 and outcome is True  # prompt + reply above --max-tokens: cut
    assert run_state.tally.warnings == {loop.LONG_PROMPT: 1}
    server = FakeServer(reply("Ok.", prompt=999))
    run({"messages": [{"role": "user", "content": "a"}]}, server, max_tokens=1000)
    assert run_state.tally.warnings == {loop.LONG_PROMPT: 1}
