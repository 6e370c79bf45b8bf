"""The loopback render server in a process of its own (no GIL shared with what is measured):
``python loopback_render_server.py MODEL``; prints its URL, then serves until killed.

It is the tests' stand-in for vLLM's ``/v1/chat/completions/render`` (tests/render_server.py)
with one change: TCP_NODELAY on every connection, as vLLM's server (uvicorn) sets it. Without
it ``http.server`` writes headers and body in two sends and each response waits for the
client's delayed ACK (tens of milliseconds), which would measure Nagle, not rendering.
"""

from __future__ import annotations

import signal
import socketserver
import sys
import time
from pathlib import Path

from transformers import AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from render_server import RenderServer


def main() -> None:
    socketserver.StreamRequestHandler.disable_nagle_algorithm = True
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
    with RenderServer(tokenizer) as server:
        print(server.url, flush=True)
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    main()
