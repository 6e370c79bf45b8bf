"""A spawned map worker's view: ``python processor_loader.py ENDPOINT`` loads the processor the
local renderer would load for the ``local:`` render endpoint the parent handed its map workers
(data/render/endpoint.py ``processor_of``) in a fresh process, and prints its class name."""

from __future__ import annotations

import sys

from speculators_qwen_compat.data.render import endpoint

if __name__ == "__main__":
    print(type(endpoint.processor_of(sys.argv[1])).__name__)
