"""``speculators-qwen-compat acceptance`` (speculators_qwen_compat/acceptance/).

Against a scripted OpenAI server (``pure``: no release involved): the prompts sent (turns before
the last assistant turn, temperature 0, both formats), the figures as the increase of counters
summed over two engines of the served model, the lone endpoint without speculation, the
running-requests warning, refused prompts skipped, server faults retried then counted or fatal,
restarts, runs that measured nothing, and each fatal fault as one line. Against a real vLLM 0.32
on CPU (``vllm``: one module-scoped server serving a tiny composite Qwen3.6-class checkpoint,
processor files included, with an EAGLE-3 drafter as users serve it, ``--speculative-config``):
the command's figures equal the increase of the counters read from ``/metrics`` around it by this
module's own reading of the text.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from speculators_qwen_compat.acceptance import counters

ERROR = "speculators_qwen_compat: error: "
ROWS = [
    {"messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Name a prime."},
        {"role": "assistant", "content": "7"},
    ]},
    {"conversations": [
        {"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello"},
        {"from": "human", "value": "Count to 3"}, {"from": "gpt", "value": "1 2 3"},
    ]},
    {"messages": [{"role": "user", "content": "A question with no reply yet"}]},
    {"messages": [{"role": "assistant", "content": "no user turn at all"}]},
    {"messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
            "name": "weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "content": "sunny"},
        {"role": "assistant", "content": "Sunny."},
    ], "tools": [{"type": "function", "function": {
        "name": "weather", "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]},
]  # fmt: skip
#: the real server's window (the tiny verifier's positions)
MAX_MODEL_LEN = 2048
#: what the scripted server adds per request, per engine it lands on: drafts, draft tokens,
#: accepted tokens, accepted at positions 0, 1, 2
PER_REQUEST = (2, 6, 3, 2, 1, 0)


class Scripted:
    """A scripted vLLM OpenAI server: two engines (data parallel), counters from ``start``."""

    def __init__(self, speculative: bool = True, running: int = 0, refuse: bool = False) -> None:
        self.speculative, self.running, self.refuse = speculative, running, refuse
        self.has_metrics = True
        self.models = ["tiny/qwen36"]
        self.engines = [[100.0, 300.0, 120.0, 80.0, 30.0, 10.0], [50.0, 150.0, 60.0, 40, 15, 5]]
        self.bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.created = "1.7e+09"  # the counters' creation time (a restart changes it)
        self.other_model = False  # a second served model's series beside ours
        self.usage, self.drafting = True, True
        self.down = False  # nothing answers: connections are dropped
        #: a request's first message content -> statuses answered before a 200 (None: 500s)
        self.faults: dict[str, list[int] | None] = {}
        self.hook: Callable[[Scripted], None] = lambda script: None  # per chat request

    def metrics(self) -> str:
        lines = ["# TYPE vllm:num_requests_running gauge"]
        names = ("drafts", "draft_tokens", "accepted_tokens")
        served = [(self.models[0], self.engines, self.created)]
        if self.other_model:  # ten times our figures, growing with ours
            served.append(("other", [[10 * v for v in e] for e in self.engines], "1.6e+09"))
        for model, engines, created in served:
            for engine, values in enumerate(engines):
                labels = f'engine="{engine}",model_name="{model}"'
                lines.append(f"vllm:num_requests_running{{{labels}}} {self.running / 2}")
                if not self.speculative:
                    continue
                for name, value in zip(names, values[:3], strict=True):
                    lines.append(f"vllm:spec_decode_num_{name}_total{{{labels}}} {value}")
                    lines.append(f"vllm:spec_decode_num_{name}_created{{{labels}}} {created}")
                for position, value in enumerate(values[3:]):
                    at = f'{labels},position="{position}"'
                    per_pos = "vllm:spec_decode_num_accepted_tokens_per_pos"
                    lines.append(f"{per_pos}_total{{{at}}} {value}")
                    lines.append(f"{per_pos}_created{{{at}}} {created}")
        return "\n".join(lines) + "\n"

    def chat(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self.refuse:
            message = "This model's maximum context length is 512 tokens."
            return 400, {"error": {"message": message, "type": "BadRequestError", "code": 400}}
        if body.get("model") not in self.models:
            return 404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}}
        with self.lock:
            first = (body.get("messages") or [{}])[0].get("content")
            if first in self.faults:
                statuses = self.faults[first]
                if statuses is None or statuses:
                    status = statuses.pop(0) if statuses else 500
                    return status, {"error": {"message": f"scripted {status}", "code": status}}
            self.bodies.append(body)
            self.hook(self)
            engine = self.engines[len(self.bodies) % 2]
            for i, step in enumerate(PER_REQUEST if self.drafting else ()):
                engine[i] += step
        reply: dict[str, Any] = {"choices": [{"message": {"content": "x"}}]}
        if self.usage:
            reply["usage"] = {"completion_tokens": 5}
        return 200, reply


@pytest.fixture
def scripted() -> Iterator[tuple[Scripted, str]]:
    script = Scripted()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if script.down:
                self.close_connection = True
            elif self.path == "/metrics" and script.has_metrics:
                self._send(200, script.metrics().encode(), "text/plain")
            elif self.path == "/v1/models":
                self._send(200, json.dumps({"data": [{"id": m} for m in script.models]}).encode())
            elif self.path == "/health":
                self._send(200, b"", "text/plain")
            else:
                self._send(404, b'{"detail": "Not Found"}')

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            status, reply = (0, {}) if script.down else script.chat(body)
            if script.down:  # also when this very request took it down
                self.close_connection = True
                return
            self._send(status, json.dumps(reply).encode())

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield script, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _data(tmp_path: Path) -> Path:
    path = tmp_path / "heldout.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8")
    return path


def _acceptance(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "speculators_qwen_compat", "acceptance", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def _one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith(ERROR)]
    assert len(lines) == 1 and done.stderr.rstrip().endswith(lines[0]), done.stderr
    return lines[0]


@pytest.mark.pure
def test_engines_are_summed_and_created_series_ignored() -> None:
    """Data parallel: one series per engine, summed; ``_created`` timestamps are not counts."""
    script = Scripted(running=3)
    before = counters.parse(script.metrics())
    assert (before.drafts, before.draft_tokens, before.accepted_tokens) == (150, 450, 180)
    assert before.per_position == {0: 120, 1: 45, 2: 15} and before.running == 3
    script.chat({"model": "tiny/qwen36"})  # lands on engine 1
    script.chat({"model": "tiny/qwen36"})  # engine 0
    added = counters.increase(before, counters.parse(script.metrics()))
    assert added is not None
    assert (added.drafts, added.draft_tokens, added.accepted_tokens) == (4, 12, 6)
    assert added.per_position_accepted == [4, 2, 0]
    assert added.acceptance_rate == 0.5 and added.mean_acceptance_length == 2.5
    assert added.per_position == [1.0, 0.5, 0.0]
    assert counters.increase(before, counters.parse(Scripted(speculative=False).metrics())) is None
    with pytest.raises(ValueError, match="restarted"):
        counters.increase(counters.parse(script.metrics()), before)
    started = "process_start_time_seconds 1.7e+09\n"
    restarted = counters.parse(script.metrics() + started.replace("1.7", "1.8"))
    with pytest.raises(ValueError, match="created again during the run: the server restarted"):
        counters.increase(counters.parse(script.metrics() + started), restarted)


@pytest.mark.pure
def test_figures_are_the_increase_of_the_prompts_sent(
    scripted: tuple[Scripted, str], tmp_path: Path
) -> None:
    """Only the served model's series count: another model's beside them are left out."""
    script, url = scripted
    script.other_model = True
    out = tmp_path / "figures.json"
    done = _acceptance("--endpoint", url, "--data", str(_data(tmp_path)), "--max-tokens", "7",
                       "--concurrency", "2", "--json", str(out))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    sent = {body["messages"][0]["content"]: body for body in script.bodies}
    firsts = ("A question with no reply yet", "Be brief.", "Hi")
    assert [sent[first]["messages"] for first in firsts] == [
        [{"role": "user", "content": "A question with no reply yet"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a prime."}],
        [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
         {"role": "user", "content": "Count to 3"}],
    ]  # fmt: skip
    tool = sent["Weather in Paris?"]
    assert [turn["role"] for turn in tool["messages"]] == ["user", "assistant", "tool"]
    assert tool["tools"] == ROWS[4]["tools"] and tool["tool_choice"] == "none"
    assert all(b["temperature"] == 0 and b["max_tokens"] == 7 for b in sent.values())
    assert "skipped 1 conversations: 1 no user turn" in done.stderr, done.stderr
    (figures,) = json.loads(out.read_text())["endpoints"]
    wanted = {"requests": 4, "completion_tokens": 20, "drafts": 8, "draft_tokens": 24,
              "accepted_tokens": 12, "acceptance_rate": 0.5, "mean_acceptance_length": 2.5,
              "per_position": [1.0, 0.5, 0.0], "model": "tiny/qwen36"}  # fmt: skip
    assert {k: figures[k] for k in wanted} == wanted
    assert figures["tokens_per_second"] == pytest.approx(20 / figures["seconds"])
    table = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in
                 done.stdout.splitlines()[1:] if "  " in line.strip())  # fmt: skip
    assert table["acceptance rate"] == "50.0%" and table["mean acceptance length"] == "2.50"
    assert table["accepted at position 1"] == "50.0%", done.stdout
    assert "other requests it served during the run count" in done.stdout
    assert "warning" not in done.stderr


@pytest.mark.pure
def test_side_by_side_with_no_speculation_and_running_requests_warned(
    scripted: tuple[Scripted, str], tmp_path: Path
) -> None:
    """The same endpoint twice as two columns; a server without speculation: tokens/s only
    (alone: one line); requests running at the start: a warning."""
    script, url = scripted
    data = str(_data(tmp_path))
    script.running = 2
    done = _acceptance("--endpoint", url, "--endpoint", url + "/v1", "--data", data)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("was running 2 requests when the measurement started") == 2
    header = done.stdout.splitlines()[0].split()
    assert header == [url + "/v1", url + "/v1"]
    script.speculative, script.running = False, 0
    done = _acceptance("--endpoint", url, "--data", data)
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    assert line.startswith(f"{url}/v1: no speculative decoding") and "tokens/s" in line, line
    script.has_metrics = False  # an OpenAI server that is not vLLM's
    done = _acceptance("--endpoint", url, "--data", data)
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    assert line.startswith(f"{url}/v1: no /metrics: not vLLM's OpenAI server"), line


@pytest.mark.pure
def test_faults_are_one_line(scripted: tuple[Scripted, str], tmp_path: Path) -> None:
    """A server that is down, a model name it does not serve, a refused request."""
    script, url = scripted
    data = str(_data(tmp_path))
    down = _one_error_line(_acceptance("--endpoint", "http://127.0.0.1:9", "--data", data))
    assert "no answer" in down and "is vLLM serving there?" in down, down
    wrong = _one_error_line(_acceptance("--endpoint", url, "--data", data, "--model", "other"))
    assert "--model other: the server at" in wrong and "serves tiny/qwen36" in wrong, wrong
    script.models.append("second")
    several = _one_error_line(_acceptance("--endpoint", url, "--data", data))
    assert "choose one with --model" in several, several
    script.refuse = True  # every prompt refused: skipped each, so nothing measured
    refused = _one_error_line(_acceptance("--endpoint", url, "--data", data, "--model", "second"))
    assert "answered none of the requests (4 HTTP 400: This model's maximum" in refused, refused


@pytest.mark.pure
def test_a_request_fault_is_not_the_runs(scripted: tuple[Scripted, str], tmp_path: Path) -> None:
    """A prompt refused (400) is skipped and counted, a 5xx retried, a request a live server
    keeps failing counted as failed; the run goes on and the figures are the answered ones."""
    script, url = scripted
    out = tmp_path / "figures.json"
    script.faults = {"Hi": [400], "Be brief.": [503, 500], "Weather in Paris?": None}
    done = _acceptance("--endpoint", url, "--data", str(_data(tmp_path)), "--json", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    (figures,) = json.loads(out.read_text())["endpoints"]
    assert figures["refused"] == {"HTTP 400: scripted 400": 1} and figures["failed"] == 1
    assert (figures["requests"], figures["completion_tokens"], figures["drafts"]) == (2, 10, 4)
    assert "1 requests refused: 1 HTTP 400: scripted 400" in done.stderr, done.stderr
    assert "1 requests failed: 1 HTTP 500" in done.stderr, done.stderr
    rows = {line.split("  ")[0]: line.split()[-1] for line in done.stdout.splitlines()}
    assert rows["refused requests"] == "1" and rows["failed requests"] == "1", done.stdout


@pytest.mark.pure
def test_a_server_that_stops_answering(scripted: tuple[Scripted, str], tmp_path: Path) -> None:
    """Down during the second endpoint's run: one line, exit 1, the first endpoint's figures
    printed and written."""
    script, url = scripted
    out = tmp_path / "figures.json"

    def hook(script: Scripted) -> None:
        script.down = len(script.bodies) > 4  # the second endpoint's first request

    script.hook = hook
    done = _acceptance("--endpoint", url, "--endpoint", url + "/v1",
                       "--data", str(_data(tmp_path)), "--json", str(out))  # fmt: skip
    line = _one_error_line(done)
    assert line.startswith(ERROR + f"the server at {url} stopped answering ("), line
    (figures,) = json.loads(out.read_text())["endpoints"]
    assert figures["requests"] == 4 and figures["drafts"] == 8, figures
    assert "acceptance rate" in done.stdout, done.stdout


@pytest.mark.pure
def test_nothing_measured_is_an_error(scripted: tuple[Scripted, str], tmp_path: Path) -> None:
    """Drafts that did not increase, replies without usage: one line, not a column of zeros."""
    script, url = scripted
    data = str(_data(tmp_path))
    script.drafting = False
    line = _one_error_line(_acceptance("--endpoint", url, "--data", data))
    assert "has speculative decoding but drafted nothing" in line, line
    script.drafting, script.usage = True, False
    line = _one_error_line(_acceptance("--endpoint", url, "--data", data))
    assert "answered without usage (completion_tokens)" in line, line
    script.speculative = False
    line = _one_error_line(_acceptance("--endpoint", url, "--data", data))
    assert "answered without usage (completion_tokens)" in line, line


@pytest.mark.pure
def test_a_restart_during_the_run(scripted: tuple[Scripted, str], tmp_path: Path) -> None:
    """Counters created again (higher than before, so none went down), and counters that were
    absent before the run: the server restarted, one line."""
    script, url = scripted
    data = str(_data(tmp_path))

    def restart(script: Scripted) -> None:
        script.created, script.speculative = "1.8e+09", True

    script.hook = restart
    line = _one_error_line(_acceptance("--endpoint", url, "--data", data))
    assert "were created again during the run: the server restarted" in line, line
    script.created, script.speculative = "1.7e+09", False
    line = _one_error_line(_acceptance("--endpoint", url, "--data", data))
    assert "counters appeared during the run: the server restarted" in line, line


@pytest.mark.pure
def test_json_is_a_new_file(scripted: tuple[Scripted, str], tmp_path: Path) -> None:
    """An existing --json file is refused before any request; another run's temporary file
    beside it is left alone."""
    script, url = scripted
    data = str(_data(tmp_path))
    out = tmp_path / "figures.json"
    out.write_text("earlier\n")
    line = _one_error_line(_acceptance("--endpoint", url, "--data", data, "--json", str(out)))
    assert f"--json {out} exists" in line and not script.bodies, line
    assert out.read_text() == "earlier\n"
    out.unlink()
    other = tmp_path / "figures.json.partial"
    other.write_text("another run's\n")
    done = _acceptance("--endpoint", url, "--data", data, "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert other.read_text() == "another run's\n" and json.loads(out.read_text())["rows"] == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name, other.name, "heldout.jsonl"]


@pytest.fixture(scope="module")
def drafter_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """vLLM 0.32 serving a tiny composite Qwen3.6-class verifier (processor files included)
    with an EAGLE-3 drafter saved by the release's own construction path, as users serve it.
    The verifier's final norm is zero (``x*(1+w)``, w = -1) and so is the drafter's (``x*w``):
    greedy text is token 0 throughout and the drafter proposes token 0, so every draft token is
    accepted, a figure a wrong counter cannot give."""
    import tiny_checkpoints as tiny
    import torch
    import vllm_server
    from drafters import build_drafter
    from safetensors.torch import load_file, save_file

    root = tmp_path_factory.mktemp("acceptance")
    verifier = tiny.write_checkpoint(
        root / "verifier", "qwen35", sizes=tiny.VLLM, bf16=True, processor=True
    )
    weights = load_file(verifier / "model.safetensors")
    weights["model.language_model.norm.weight"].fill_(-1.0)
    save_file(weights, verifier / "model.safetensors", metadata={"format": "pt"})
    drafter = build_drafter(verifier, "eagle3", root / "eagle3.run")
    with torch.no_grad():
        drafter.norm.weight.zero_()
    drafter.save_pretrained(root / "eagle3")
    speculative = {"method": "eagle3", "model": str(root / "eagle3"), "num_speculative_tokens": 3}
    with vllm_server.serve([
        "vllm", "serve", str(verifier), "--max-model-len", str(MAX_MODEL_LEN),
        "--speculative-config", json.dumps(speculative),
        "--enforce-eager", "--dtype", "bfloat16", "--no-enable-prefix-caching",
    ]) as server:  # fmt: skip
        yield server


@pytest.mark.vllm
def test_real_vllm_figures_are_the_counters_increase(drafter_served: Any, tmp_path: Path) -> None:
    """The README's flags against a real vLLM with a drafter: every figure equals the increase
    of /metrics read around the run by Prometheus' own parser (metrics_oracle.py)."""
    from metrics_oracle import spec_counters

    out = tmp_path / "acceptance.json"
    before = spec_counters(drafter_served.url)
    done = _acceptance("--endpoint", drafter_served.url, "--data", str(_data(tmp_path)),
                       "--rows", "200", "--max-tokens", "24", "--concurrency", "2",
                       "--json", str(out))  # fmt: skip
    after = spec_counters(drafter_served.url)
    assert done.returncode == 0, done.stdout + done.stderr
    (figures,) = json.loads(out.read_text())["endpoints"]
    for name in ("drafts", "draft_tokens", "accepted_tokens"):
        assert figures[name] == after[name] - before[name], (name, figures, before, after)
    positions = sorted(after["per_position"])
    assert positions == [0, 1, 2]
    added = [after["per_position"][p] - before["per_position"].get(p, 0) for p in positions]
    assert figures["per_position_accepted"] == added
    assert figures["requests"] == 4 and figures["completion_tokens"] == 4 * 24
    assert figures["drafts"] > 0 and figures["accepted_tokens"] == figures["draft_tokens"]
    assert figures["mean_acceptance_length"] == 4.0 and figures["per_position"] == [1.0] * 3
    assert "mean acceptance length" in done.stdout and "warning" not in done.stderr


@pytest.mark.vllm
def test_real_vllm_faults_and_running_requests(drafter_served: Any, tmp_path: Path) -> None:
    """The same server: a model name it does not serve and a run whose every request it
    refuses (a prompt above --max-model-len: skipped, so nothing measured) are one line; the
    gauge of running requests is read from vLLM's own /metrics while one runs (the warning it
    leads to: test_side_by_side_with_no_speculation_and_running_requests_warned). Not the whole
    command beside the busy requests: vLLM 0.32's CPU engine left its four requests running,
    unanswered, for 300-700 s on a loaded machine."""
    from speculators_qwen_compat.acceptance.measure import read_metrics

    data = str(_data(tmp_path))
    wrong = _one_error_line(
        _acceptance("--endpoint", drafter_served.endpoint, "--data", data, "--model", "nope")
    )
    assert "--model nope: the server at" in wrong, wrong
    long = tmp_path / "long.jsonl"
    long.write_text(json.dumps({"messages": [{"role": "user", "content": "word " * 3000}]}))
    refused = _one_error_line(_acceptance("--endpoint", drafter_served.url, "--data", str(long)))
    assert "answered none of the requests (1 HTTP 400: " in refused, refused
    served = _served_name(drafter_served.url)
    with _kept_busy(drafter_served.url, drafter_served.port):
        _wait_running(drafter_served.url)
        # Read again until the parser sees one: both busy clients may be between requests at
        # the moment of one read (rare), but not for the whole deadline.
        deadline = time.monotonic() + 30
        snapshot = read_metrics(drafter_served.endpoint, served)
        while (snapshot is None or snapshot.running < 1) and time.monotonic() < deadline:
            time.sleep(0.2)
            snapshot = read_metrics(drafter_served.endpoint, served)
    assert snapshot is not None and snapshot.running >= 1, snapshot


@contextlib.contextmanager
def _kept_busy(url: str, port: int) -> Iterator[None]:
    """Two clients that keep a request running on the server until the block ends.

    Each client sends the next request as soon as one ends, so a loaded machine cannot finish
    them all before the gauge is read; their lengths differ, so they seldom end together. They
    are short (each token one step: sampled at temperature 1, the drafter's token 0 is
    rejected), so the server is idle again soon after the block. At the end the sockets are
    shut (vLLM aborts what runs), and a client that connects after that sends nothing. (A
    one-token prompt would kill vLLM 0.32's CPU engine: "causal_conv1d_fwd_cpu: expect x to be
    transposed".)"""
    stop = threading.Event()
    open_sockets: list[socket.socket] = []
    lock = threading.Lock()

    def client(max_tokens: int) -> None:
        busy = {"model": _served_name(url), "prompt": "Count to a thousand, slowly.",
                "max_tokens": max_tokens, "ignore_eos": True, "temperature": 1.0}  # fmt: skip
        while not stop.is_set():
            connection = http.client.HTTPConnection("127.0.0.1", port)
            try:
                connection.connect()
                with lock:
                    if stop.is_set():
                        return
                    open_sockets.append(connection.sock)
                connection.request("POST", "/v1/completions", json.dumps(busy),
                                   {"Content-Type": "application/json"})  # fmt: skip
                connection.getresponse().read()
            except OSError:
                pass  # the socket shut at the end of the block
            finally:
                connection.close()

    clients = [threading.Thread(target=client, args=(length,), daemon=True)
               for length in BUSY_TOKENS]  # fmt: skip
    for thread in clients:
        thread.start()
    try:
        yield
    finally:
        with lock:
            stop.set()
            for sock in open_sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        for thread in clients:
            thread.join(timeout=60)


#: the busy clients' reply lengths (_kept_busy): different, so that they seldom end together
BUSY_TOKENS = (160, 97)


def _served_name(url: str) -> str:
    with urllib.request.urlopen(url + "/v1/models", timeout=30) as reply:
        return json.load(reply)["data"][0]["id"]


def _wait_running(url: str, timeout: float = 60) -> None:
    """Until the server's own gauge shows a running request."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with urllib.request.urlopen(url + "/metrics", timeout=30) as reply:
            text = reply.read().decode()
        if re.search(r"^vllm:num_requests_running\{[^}]*\} [1-9]", text, re.MULTILINE):
            return
        time.sleep(0.2)
    raise AssertionError("the other request never ran")


@pytest.mark.pure
def test_table_beside_no_speculation_and_the_bar() -> None:
    """A column without speculation shows tokens/s, dashes for the rest, and a line under the
    table; the bar redraws in place on a terminal and keeps a warning on a line of its own."""
    import io

    from speculators_qwen_compat.acceptance.counters import Increase
    from speculators_qwen_compat.acceptance.measure import Result
    from speculators_qwen_compat.acceptance.progress import Progress
    from speculators_qwen_compat.acceptance.report import table

    drafted = Result("http://a/v1", "m", 2, 40, 2.0, 0, Increase(10, 30, 15, [8, 5, 2]))
    plain = Result("http://b/v1", "m", 2, 40, 4.0, 0, None)
    rows = {line.split("  ")[0]: line.split() for line in table([drafted, plain]).splitlines()}
    assert rows["tokens/s"][-2:] == ["20.0", "10.0"]
    assert rows["acceptance rate"][-2:] == ["50.0%", "-"]
    assert rows["mean acceptance length"][-2:] == ["2.50", "-"]
    assert rows["accepted at position 2"][-2:] == ["20.0%", "-"]
    assert "http://b/v1: no speculative decoding" in table([drafted, plain]).splitlines()[-1]

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    bar = Progress("http://a", 3, screen)
    bar.tick()
    bar.note("warning: busy")
    bar.tick()
    bar.close()
    text = screen.getvalue()
    assert "\r" in text and "1/3 requests" in text and text.endswith("2/3 requests 0 s\n")
    assert "\nwarning: busy\n" in text.replace("\r\033[K", "\n")
