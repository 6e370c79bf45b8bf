"""A loopback stand-in for vLLM's ``POST /v1/chat/completions/render`` (vLLM cannot run here).

It follows the contract speculators 0.8+ rely on (docs/upstream.md "Local rendering"): JSON
body with ``messages``,
``add_generation_prompt``, optional ``tools``, ``chat_template_kwargs``,
``truncate_prompt_tokens`` and ``truncation_side``; answers ``{"token_ids": [...]}``; a template
error is a 400 with vLLM's error shape. Rendering is the served tokenizer's chat template, then
token ids without added special tokens. Used by the tests and by ``make bench``.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from speculators_qwen_compat.data.render import render_ids

RENDER_PATH = "/v1/chat/completions/render"


class RenderServer:
    """``with RenderServer(tokenizer) as server: server.url``; ``server.requests`` counts calls."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.requests = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                owner.requests += 1
                if self.path != RENDER_PATH:
                    return self._reply(404, {"error": {"message": "not found"}})
                try:
                    ids = render_ids(
                        owner.tokenizer,
                        body["messages"],
                        add_generation_prompt=body.get("add_generation_prompt", True),
                        tools=body.get("tools"),
                        chat_template_kwargs=body.get("chat_template_kwargs"),
                        truncate_prompt_tokens=body.get("truncate_prompt_tokens"),
                        truncation_side=body.get("truncation_side"),
                    )
                except Exception as exc:
                    return self._reply(400, {"error": {"message": str(exc), "code": 400}})
                return self._reply(200, {"token_ids": ids})

            def _reply(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> RenderServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
