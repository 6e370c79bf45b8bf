"""A stand-in vLLM chat server for regenerate-responses runs that need many requests answered fast
(a full disk mid-run, grouped refusals, the endpoint's forms, the bench's request loop).

It answers what vLLM 0.32's OpenAI server answers a ``return_token_ids`` request with, the
prompt rendered by the model's own chat template (``apply_chat_template`` of the model folder's
tokenizer, ``tools`` included): ``prompt_token_ids``, one choice with ``token_ids``, the reply's
``reasoning`` and ``content`` (or a qwen3_coder-shaped ``tool_calls`` when the last user turn
says ``[call NAME]``; ``[slow]``: answered after SLOW_SECONDS), ``finish_reason`` ``stop``. A
prompt above ``max_input_tokens`` is refused with vLLM's own 400 ("This model's maximum context
length is L tokens. However, your prompt contains N input tokens, ...", renderers/params.py), a
template error with a 400 carrying the template's words, any other path with FastAPI's 404.
``/v1/models`` and ``/health`` answer as vLLM's do; ``/stats`` counts the requests answered.
The replies are fixed text (no model runs): what is measured is the client.

``python tests/regen_stand_in.py MODEL_DIR PORT_FILE [MAX_INPUT_TOKENS]`` serves until killed
and writes its URL to PORT_FILE once it listens (the bench runs it in its own process, so its
CPU is not the client's).
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REASONING = "The user asks; answer briefly."
ANSWER = "Sure, here it is."
_CALL = re.compile(r"\[call (\w+)\]")
SLOW_SECONDS = 60.0


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}  # fmt: skip


def chat(conv_id: str, text: str) -> dict[str, Any]:
    """A one-turn conversation (the stand-in answers it with one row)."""
    return {"id": conv_id, "messages": [{"role": "user", "content": text}]}


def tool_chat(conv_id: str, pad: int = 0) -> dict[str, Any]:
    """Three rows: the call (answered from the data), its answer, a second user turn (``pad``
    words longer)."""
    call = {"id": "a", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}  # fmt: skip
    return {"id": conv_id, "tools": [WEATHER], "messages": [
        {"role": "user", "content": f"weather in Paris? [call get_weather] {conv_id}"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "a", "content": "sunny"},
        {"role": "assistant", "content": "It is sunny."},
        {"role": "user", "content": "thanks; and tomorrow? " + "word " * pad},
        {"role": "assistant", "content": "Also sunny."}]}  # fmt: skip


def wait_for_rows(process: Any, path: Path, count: int, seconds: float = 300) -> None:
    """Until ``path`` holds ``count`` lines, ``process`` (a Popen) ended, or ``seconds``
    passed: the moment a test or the bench interrupts a run mid-way."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        if path.exists() and len(path.read_bytes().splitlines()) >= count:
            return
        time.sleep(0.1)


class StandIn:
    """``StandIn(model_dir)``: listens on 127.0.0.1 (``.url``) in a thread; ``close()`` stops it."""

    def __init__(self, model_dir: Path | str, max_input_tokens: int = 1 << 30) -> None:
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.model = str(model_dir)
        self.max_input_tokens = max_input_tokens
        self.lock = threading.Lock()  # one render at a time, as vLLM's renderer
        self.requests = 0
        handler = type("Handler", (_Handler,), {"stand_in": self})
        self.server = _Server(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        messages = [_parsed_calls(m) for m in body.get("messages") or []]
        tools = body.get("tools")
        if "[slow]" in json.dumps(messages[-1:]):  # a reply that takes long (Ctrl-C mid-run)
            time.sleep(SLOW_SECONDS)
        try:
            with self.lock:
                text = self.tokenizer.apply_chat_template(
                    messages, tools=tools, add_generation_prompt=True, tokenize=False
                )
                prompt = self.tokenizer.encode(text, add_special_tokens=False)
        except Exception as exc:  # the template's refusal: vLLM's 400 with its words
            return 400, _error(str(exc))
        if len(prompt) > self.max_input_tokens:
            return 400, _error(
                f"This model's maximum context length is {self.max_input_tokens} tokens. "
                f"However, your prompt contains {len(prompt)} input tokens, which exceeds this "
                "limit even without any output tokens. Please reduce the length of the input "
                "prompt."
            )
        with self.lock:
            self.requests += 1
        last = messages[-1] if messages else {}
        wanted = (
            _CALL.search(json.dumps(last.get("content"))) if last.get("role") == "user" else None
        )
        message: dict[str, Any] = {"role": "assistant", "reasoning": REASONING, "content": ANSWER}
        generated = f"{REASONING}\n</think>\n\n{ANSWER}"
        if wanted:
            name = wanted.group(1)
            arguments = json.dumps({"city": "Paris"})
            call = {"id": f"call-{self.requests}", "type": "function",
                    "function": {"name": name, "arguments": arguments}}  # fmt: skip
            message = {"role": "assistant", "reasoning": REASONING, "content": None,
                       "tool_calls": [call]}  # fmt: skip
            generated = (
                f"{REASONING}\n</think>\n\n<tool_call>\n<function={name}>\n<parameter=city>\n"
                "Paris\n</parameter>\n</function>\n</tool_call>"
            )
        completion = self.tokenizer.encode(generated, add_special_tokens=False)
        return 200, {
            "id": f"chatcmpl-{self.requests}",
            "object": "chat.completion",
            "model": body.get("model"),
            "prompt_token_ids": prompt,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if wanted else "stop",
                    "token_ids": completion,
                }
            ],
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(completion),
                "total_tokens": len(prompt) + len(completion),
            },
        }


def _parsed_calls(message: dict[str, Any]) -> dict[str, Any]:
    """An assistant turn's call arguments as the template reads them: vLLM parses the JSON
    text a client sends back before rendering."""
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if not calls:
        return message
    parsed = []
    for call in calls:
        function = dict(call.get("function") or {})
        if isinstance(function.get("arguments"), str):
            function["arguments"] = json.loads(function["arguments"])
        parsed.append({**call, "function": function})
    return {**message, "tool_calls": parsed}


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a run stopped, a request cancelled) is not an error here."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    stand_in: StandIn
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": self.stand_in.model,
                                                          "object": "model"}]})  # fmt: skip
        elif self.path == "/health":
            self._send(200, {})
        elif self.path == "/stats":  # the stand-in's own: chat requests answered so far
            self._send(200, {"requests": self.stand_in.requests})
        else:
            self._send(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path != "/v1/chat/completions":
            self._send(404, {"detail": "Not Found"})
            return
        self._send(*self.stand_in.answer(json.loads(raw)))


if __name__ == "__main__":
    limit = int(sys.argv[3]) if len(sys.argv) > 3 else 1 << 30
    served = StandIn(sys.argv[1], limit)
    Path(sys.argv[2]).write_text(served.url, encoding="utf-8")
    threading.Event().wait()
