"""A render endpoint that answers each request the way a scripted fault would: the fault injector
of tests/test_render_fault_classes.py (a real vLLM cannot be told to answer 429 or an HTML page).

``python render_fault_server.py PORT_FILE [MODEL]``: serves on a free port of 127.0.0.1 (written
to PORT_FILE once listening) until killed. The mode is the URL's first path segment, so one
server answers every mode: ``--render-endpoint http://127.0.0.1:PORT/MODE`` makes upstream POST
to ``/MODE/v1/chat/completions/render``. ``MODES`` says what each answers (status, content type,
body), every request alike; ``refuse-marked`` answers 400 with a template error as vLLM 0.32
words it for a conversation holding ``MARKER`` and renders every other one with ``MODEL``'s chat
template applied by transformers (``apply_chat_template``, not this package), ids as upstream
reads them (``token_ids``), truncated as 0.9 asks. ``slow`` answers after ``SLOW_SECONDS``.
Importable too (``serve``): the per-class unit test runs it in a thread of its own process.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

RENDER_PATH = "/v1/chat/completions/render"
MARKER = "REFUSE-THIS-CONVERSATION"
#: vLLM 0.32's answer to a conversation its chat template raises on (an OpenAI error object)
TEMPLATE_ERROR = {
    "error": {
        "message": "No user query found in messages.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
}
SLOW_SECONDS = 5.0
FETCH_ERROR = "Cannot connect to host images.invalid:443 ssl:default [Name or service not known]"
_JSON = "application/json"
_HTML = "text/html; charset=utf-8"
_PROXY_PAGE = "<html><head><title>{0}</title></head><body><h1>{0}</h1><hr>nginx</body></html>"


def _error(status: int, message: str) -> tuple[int, str, str]:
    return status, _JSON, json.dumps({"error": {"message": message, "code": status}})


#: mode -> (status, content type, body) answered to every request
MODES: dict[str, tuple[int, str, str]] = {
    "500": _error(500, "EngineCore encountered an issue."),
    "502-html": (502, _HTML, _PROXY_PAGE.format("502 Bad Gateway")),
    "503": _error(503, "Service Unavailable"),
    "408": _error(408, "Request Timeout"),
    "429": _error(429, "Too Many Requests"),
    "401": _error(401, "Unauthorized"),
    "403": _error(403, "Forbidden"),
    "404": (404, _JSON, json.dumps({"detail": "Not Found"})),  # FastAPI's own
    "405": (405, _JSON, json.dumps({"detail": "Method Not Allowed"})),
    "400-text": (400, "text/plain", "Bad Request"),  # a proxy's, not the server's
    "400-html": (400, _HTML, _PROXY_PAGE.format("400 Bad Request")),
    "200-no-ids": (200, _JSON, json.dumps({"request_id": "render-1", "prompt_token_ids": []})),
    "200-null-ids": (200, _JSON, json.dumps({"token_ids": None})),
    "200-html": (200, _HTML, _PROXY_PAGE.format("Sign in")),  # a captive portal, a login page
    "refuse": (400, _JSON, json.dumps(TEMPLATE_ERROR)),
    # vLLM 0.32's answer to an image URL it cannot fetch (its aiohttp's words)
    "fetch": _error(500, FETCH_ERROR),
    "validation": (
        400,
        _JSON,
        json.dumps({"detail": [{"loc": ["body", "messages"], "msg": "Field required"}]}),
    ),
}


class _Handler(BaseHTTPRequestHandler):
    model: str | None = None
    _tokenizer: Any = None
    _lock = threading.Lock()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        mode, _, rest = self.path.lstrip("/").partition("/")
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if "/" + rest != RENDER_PATH:
            self._answer(404, _JSON, json.dumps({"detail": "Not Found"}))
        elif mode in MODES:
            self._answer(*MODES[mode])
        elif mode == "slow":
            time.sleep(SLOW_SECONDS)
            self._answer(200, _JSON, json.dumps({"token_ids": [1]}))
        elif mode == "refuse-marked":
            request = json.loads(body)
            if MARKER in json.dumps(request["messages"]):
                self._answer(*MODES["refuse"])
            else:
                self._answer(200, _JSON, json.dumps({"token_ids": self._render(request)}))
        else:
            self._answer(404, _JSON, json.dumps({"detail": f"no mode {mode!r}"}))

    def _answer(self, status: int, content_type: str, text: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _render(self, request: dict[str, Any]) -> list[int]:
        """The ids of the request as the chat template renders it (transformers' own)."""
        with self._lock:
            if _Handler._tokenizer is None:
                from transformers import AutoTokenizer

                _Handler._tokenizer = AutoTokenizer.from_pretrained(self.model)
            tokenizer = _Handler._tokenizer
            text = tokenizer.apply_chat_template(
                request["messages"],
                tools=request.get("tools"),
                add_generation_prompt=request["add_generation_prompt"],
                tokenize=False,
                **(request.get("chat_template_kwargs") or {}),
            )
            ids = tokenizer.encode(text, add_special_tokens=False)
        limit = request.get("truncate_prompt_tokens")
        if limit is not None and 0 <= limit < len(ids):
            ids = ids[-limit:] if request.get("truncation_side") == "left" else ids[:limit]
        return ids


def serve(model: str | None = None) -> ThreadingHTTPServer:
    """The server, bound to a free port of 127.0.0.1 (``server_address[1]``), not yet serving."""
    handler = type("Handler", (_Handler,), {"model": model})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    return server


def main(argv: list[str]) -> int:
    server = serve(argv[1] if len(argv) > 1 else None)
    port_file = Path(argv[0])
    staged = port_file.with_name(port_file.name + ".part")  # never read half written
    staged.write_text(str(server.server_address[1]))
    staged.rename(port_file)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
