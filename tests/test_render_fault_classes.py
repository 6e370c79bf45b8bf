"""Each way a render endpoint can answer, classified as docs/faults.md's fault table says: only the
server's refusal of a conversation (a 4xx with a JSON error, e.g. a template error) is a skipped
row; every other answer is the server's or the network's fault, retried, then fatal.

0.8+ only (not applicable before: <= 0.7 render with the local tokenizer, there is no render
client). The faults come from tests/programs/render_fault_server.py (a stdlib server answering
per a scripted mode: a real vLLM cannot be told to answer 429); what is classified is the
exception upstream's own render client (``render_client.render_conversation``, undecorated as
our fix calls it) raises on that answer, so the oracle of "what does upstream raise" is the
installed release itself, and the oracle of skip-or-fail is that table:

- per class, in this process: the upstream exception type, ``is_refusal`` / ``is_server_fault`` /
  ``is_data_problem``, the retry budget, and what data/render/render_faults.py's ``render`` makes of
  it (the refusal raised as upstream raised it; anything else ``RenderServerFailed``);
- end to end, in one interpreter (conftest.run_batch): prepare_data with two map workers against
  the server in each mode; a fault fails the run with our one line and leaves no --output, the
  refusal of the marked conversations is a counted skip and every other conversation is kept
  with the mask tests/mask_oracle.py computes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    RENDERS,
    good_rows,
    last_line,
    prepare_args,
    program,
    read_report,
    run_batch,
    subprocess_env,
    write_dataset,
)
from mask_oracle import check_masks, load_rows
from programs import render_fault_server as fault_server

from speculators_qwen_compat.core.run_options import RUN_ENV, RunOptions
from speculators_qwen_compat.data.account.row_errors import is_data_problem
from speculators_qwen_compat.data.render import render_faults

pytestmark = pytest.mark.skipif(
    not RENDERS, reason="not applicable: speculators <= 0.7 has no render client"
)

SKIP, FAIL = "skip", "fail"
#: mode -> (the exception upstream's client raises, by name; what the run must do; the budget
#: it retries for: "wrong address" = render_faults.WRONG_ADDRESS_SECONDS)
CLASSES: dict[str, tuple[str, str, str]] = {
    "500": ("RenderError", FAIL, "retry"),
    "503": ("RenderError", FAIL, "retry"),
    "502-html": ("RenderError", FAIL, "retry"),
    "408": ("RenderError", FAIL, "retry"),
    "429": ("RenderError", FAIL, "retry"),
    "401": ("InvalidResponseError", FAIL, "wrong address"),
    "403": ("InvalidResponseError", FAIL, "wrong address"),
    "404": ("InvalidResponseError", FAIL, "wrong address"),
    "405": ("InvalidResponseError", FAIL, "wrong address"),
    "400-text": ("InvalidResponseError", FAIL, "retry"),
    "400-html": ("InvalidResponseError", FAIL, "retry"),
    "200-no-ids": ("RenderError", FAIL, "retry"),
    "200-null-ids": ("RenderReplyMalformed", FAIL, "retry"),  # upstream returns None; we raise
    "200-html": ("JSONDecodeError", FAIL, "retry"),
    "slow": ("ReadTimeout", FAIL, "retry"),
    "closed-port": ("ConnectError", FAIL, "retry"),
    "refuse": ("InvalidResponseError", SKIP, ""),
    "validation": ("InvalidResponseError", SKIP, ""),
    "fetch": ("RenderError", SKIP, ""),  # one image URL the server could not fetch
}
MESSAGES = [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi."}]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The fault server in a thread of this process: its base URL."""
    httpd = fault_server.serve()
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _endpoint(base: str, mode: str) -> str:
    if mode == "closed-port":
        from vllm_server import free_port

        return f"http://127.0.0.1:{free_port()}"  # nothing listens there
    return f"{base}/{mode}"


def _raw(endpoint: str) -> Any:
    """One request through upstream's client as our fix makes it (without upstream's retries:
    ``__wrapped__``), timing out sooner than the slow mode answers."""
    from speculators.data_generation.render_client import render_conversation

    raw = render_conversation.__wrapped__
    timeout = fault_server.SLOW_SECONDS / 5
    return lambda: raw(endpoint, MESSAGES, add_generation_prompt=False, timeout=timeout)


def _upstream_raises(endpoint: str) -> BaseException:
    """What upstream's client raises (or, where it returns, what our render check raises)."""
    request = _raw(endpoint)
    try:
        ids = request()
    except Exception as exc:
        return exc
    try:  # upstream accepted the answer: our check of the reply is what raises
        render_faults.checked(ids)
    except Exception as exc:
        return exc
    raise AssertionError(f"{endpoint}: no error, ids {ids!r}")


@pytest.mark.parametrize("mode", list(CLASSES))
def test_each_answer_is_classified_as_the_fault_table_says(
    mode: str, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream_type, outcome, budget = CLASSES[mode]
    endpoint = _endpoint(server, mode)
    exc = _upstream_raises(endpoint)
    assert type(exc).__name__ == upstream_type, repr(exc)

    refusal = outcome == SKIP
    assert render_faults.is_refusal(exc) is refusal, repr(exc)
    assert render_faults.is_server_fault(exc) is not refusal, repr(exc)
    assert is_data_problem(exc) is refusal, repr(exc)
    if budget == "wrong address":
        assert render_faults.budget(exc) == render_faults.WRONG_ADDRESS_SECONDS
    elif budget:
        monkeypatch.setenv(RUN_ENV, RunOptions(render_retry_seconds=7).to_json())
        assert render_faults.budget(exc) == 7.0

    # what the run's render does with it: a refusal goes to the row guard as upstream raised
    # it; a fault, past a budget too short for a second attempt, ends the run
    monkeypatch.setenv(RUN_ENV, RunOptions(render_retry_seconds=0.5).to_json())
    monkeypatch.setattr(render_faults, "WRONG_ADDRESS_SECONDS", 0.5)
    started = time.monotonic()
    with pytest.raises(Exception) as raised:
        render_faults.render(_raw(endpoint), endpoint)
    if refusal:
        assert type(raised.value) is type(exc) and str(raised.value) == str(exc)
    else:
        assert isinstance(raised.value, render_faults.RenderServerFailed), repr(raised.value)
        assert str(raised.value).startswith(f"render server {endpoint} failed: ")
        assert "still after 1 attempts" in str(raised.value)
    assert time.monotonic() - started < fault_server.SLOW_SECONDS


# ----------------------------------------------------------------- end to end, two map workers

#: the modes the runs meet, one per class of the fault table (the slow and closed-port ones are
#: the vLLM tier's killed server: tests/test_render_faults.py)
RUN_MODES = ("500", "502-html", "408", "429", "401", "403", "404", "405", "400-text",
             "200-no-ids", "200-html")  # fmt: skip
GOOD = 10


def _good() -> list[dict[str, Any]]:
    """Conversations without tools: the fault server renders with transformers' template,
    which takes tool-call arguments as vLLM hands them over only after vLLM's own parsing."""
    return [row for row in good_rows(40) if "tools" not in row][:GOOD]


def _marked() -> list[dict[str, Any]]:
    return [
        {"messages": [{"role": "user", "content": f"{fault_server.MARKER} {n}"},
                      {"role": "assistant", "content": f"Refused {n}."}]}
        for n in range(3)
    ]  # fmt: skip


@pytest.fixture(scope="module")
def runs(qwen36_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every mode's prepare_data run against the fault server as a program of its own."""
    tmp = tmp_path_factory.mktemp("fault-runs")
    port_file = tmp / "port"
    log = tmp / "server.log"
    with log.open("w") as sink:  # a file, not a pipe nobody reads while the runs go on
        served = subprocess.Popen(
            [sys.executable, str(program("render_fault_server")), str(port_file), str(qwen36_dir)],
            env=subprocess_env(), stdout=sink, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not port_file.exists():
            assert served.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the fault server did not start"
            time.sleep(0.1)
        base = f"http://127.0.0.1:{port_file.read_text()}"
        good = _good()
        rows = good[:5] + _marked() + good[5:]
        data = write_dataset(tmp / "d.jsonl", rows)
        cases, outputs = {}, {}
        for mode in (*RUN_MODES, "refuse-marked"):
            outputs[mode] = tmp / f"out-{mode}"
            # a budget of one retry: every fault is met by both workers and retried once (1 s)
            extra = ("--render-endpoint", f"{base}/{mode}", "--render-retry-seconds", "2")
            cases[mode] = prepare_args(qwen36_dir, outputs[mode], data, workers=2, extra=extra)
        ran = run_batch(tmp / "logs", cases)
    finally:
        served.kill()
        served.wait()
    return {"ran": ran, "outputs": outputs, "base": base, "good": good, "rows": rows, "data": data}


@pytest.mark.parametrize("mode", RUN_MODES)
def test_a_fault_fails_the_run_with_two_workers(mode: str, runs: dict[str, Any]) -> None:
    run = runs["ran"][mode]
    assert run.returncode == 1, run.stderr[-3000:]
    line = last_line(run.stderr)
    endpoint = f"{runs['base']}/{mode}"
    status = mode.partition("-")[0]
    cause = f"HTTP {status}" if status != "200" else CLASSES[mode][0]  # upstream's, by name
    assert line.startswith(
        f"speculators_qwen_compat: error: render server {endpoint} failed: {cause}"
    ), line
    assert "conversations were done and nothing was written" in line
    assert not runs["outputs"][mode].exists()
    assert "skipped" not in run.stdout


def test_a_refused_conversation_is_a_counted_skip_with_two_workers(
    runs: dict[str, Any], qwen36_dir: Path
) -> None:
    run = runs["ran"]["refuse-marked"]
    assert run.returncode == 0, run.stderr[-3000:]
    output = runs["outputs"]["refuse-marked"]
    report = read_report(output)
    assert report["conversations_in"] == len(runs["rows"])
    assert report["conversations_kept"] == GOOD
    reason = fault_server.TEMPLATE_ERROR["error"]["message"]
    assert report["skipped"] == {reason: len(runs["rows"]) - GOOD}, report["skipped"]
    marked = [n for n, row in enumerate(runs["rows"], 1) if row not in runs["good"]]
    examples = report["skipped_examples"][reason]
    assert sorted(examples) == [f"{runs['data']}:{n}" for n in marked], examples
    # which conversations: exactly the unmarked ones, each with the oracle's mask
    rows = load_rows(output)
    assert len(rows) == check_masks(qwen36_dir, rows, runs["good"], True, with_tools=True)


def test_an_image_the_server_cannot_fetch_is_counted_under_its_words(server: str) -> None:
    """vLLM's 500 "Cannot connect to host" is about one request's image URL: the conversation
    is skipped under the server's own words (data/render/render_faults.py), the run goes on."""
    from speculators_qwen_compat.core.errors import reason_of

    exc = _upstream_raises(_endpoint(server, "fetch"))
    assert render_faults.refusal_reason(exc) is None  # not one of the file faults' reasons
    assert reason_of(exc) == fault_server.FETCH_ERROR


def test_an_image_outside_the_servers_folder_fails_the_run_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """vLLM 0.32 refuses a local file outside its --allowed-local-media-path, the path masked:
    a server set up for other folders, fatal at once with the fix, naming this run's media
    folder (data/normalize/inline_media.py) when it has one."""
    words = "The file path /da*/x.png must be a subpath of `--allowed-local-media-path /srv`."
    body = json.dumps({"error": {"message": words, "code": 400}})
    refused = RuntimeError(f"Render endpoint returned 400: {body}")
    monkeypatch.delenv(RUN_ENV, raising=False)
    fix = render_faults.media_config_fault(refused)
    assert fix is not None and fix.startswith("the render server cannot read an image the data")
    monkeypatch.setenv(RUN_ENV, RunOptions(inline_media_dir="/data/prepared-media").to_json())
    fix = render_faults.media_config_fault(refused)
    assert fix is not None and fix.startswith(
        "the render server cannot read the images this run wrote to /data/prepared-media or "
    )
