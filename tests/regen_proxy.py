"""Steers a real vLLM's replies per request for the regenerate-responses tests.

A random tiny model never closes its thinking, so the tests force its output with vLLM's
structured outputs (a regex, applied inside the reasoning too: ``vllm_server.serve_generation``).
One run sends every request with the same sampling parameters, so this forwarder, in the test's
own process, picks the regex per request from the markers of regen_data.py in the last user
turn (``[call NAME]``, ``[long]``) and passes everything else through unchanged, both ways: the
server generates every token, the reply and its status reach the client as vLLM sent them.
Two markers stand for a faulty gateway in front of the server (issue 33): ``[504]`` is answered
504 at once, ``[hang]`` is never answered (the connection is held, then dropped after
``HANG_SECONDS``). ``with proxy.hold():`` holds every chat request until the block ends, and
``held`` is set once one is held: a test starts a second run only once the first is mid-run.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

THINK = r"[a-z]{3,6} [a-z]{3,6}\n</think>\n\n"
ANSWER = THINK + r"[A-Z][a-z]{2,6}\."
LONG = r"[a-z ]{3000}\n</think>\n\nOk\."
CALL = (
    "<tool_call>\n<function={name}>\n<parameter={param}>\nParis\n</parameter>\n"
    "</function>\n</tool_call>"
)
PARAMS = {"get_weather": "city", "search": "query"}
_MARK = re.compile(r"\[call (\w+)\]")
HANG_SECONDS = 120.0


def _last_user(messages: list[dict[str, Any]]) -> str:
    return json.dumps(next((m.get("content") for m in reversed(messages)
                            if m.get("role") == "user"), ""))  # fmt: skip


def regex_for(messages: list[dict[str, Any]]) -> str:
    """The reply the last turn asks for (module docstring)."""
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return ANSWER
    text = json.dumps(next((m.get("content") for m in reversed(messages)
                            if m.get("role") == "user"), ""))  # fmt: skip
    if "[long]" in text:
        return LONG
    call = _MARK.search(text)
    if call:
        return THINK + CALL.format(name=call.group(1), param=PARAMS[call.group(1)])
    return ANSWER


class Proxy:
    """``Proxy(upstream_url)``: listens on 127.0.0.1 (``.url``); ``close()`` stops it."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.closed = threading.Event()
        self.gate = threading.Event()
        self.gate.set()
        self.held = threading.Event()
        handler = type(
            "Handler",
            (_Handler,),
            {"upstream": self.upstream, "server_closed": self.closed, "proxy": self},
        )
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Holds chat requests inside the block; ``held`` starts cleared (an earlier block set
        it: without the reset a test would go on before its own run sent anything)."""
        self.held.clear()
        self.gate.clear()
        try:
            yield
        finally:
            self.gate.set()

    def close(self) -> None:
        self.closed.set()
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()


class _Handler(BaseHTTPRequestHandler):
    upstream = ""
    server_closed = threading.Event()
    proxy: Proxy

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._forward(None)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        if self.path.endswith("/chat/completions"):
            if not self.proxy.gate.is_set():
                self.proxy.held.set()
                self.proxy.gate.wait()  # hold() sets it when its block ends, close() too
            last = _last_user(body.get("messages") or [])
            if "[504]" in last:
                self._reply(504, b"<html>504 Gateway Time-out</html>")
                return
            if "[hang]" in last:
                self.server_closed.wait(HANG_SECONDS)
                self.close_connection = True
                return
            body["structured_outputs"] = {"regex": regex_for(body.get("messages") or [])}
            body["temperature"] = 0
        self._forward(json.dumps(body).encode())

    def _forward(self, data: bytes | None) -> None:
        request = urllib.request.Request(
            self.upstream + self.path, data=data, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=300) as response:
                status, payload = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, payload = exc.code, exc.read()
        except OSError:  # the server is gone: the client must see a dead endpoint
            self.close_connection = True
            self.connection.close()
            return
        self._reply(status, payload)

    def _reply(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
