"""A spawned map worker's view: ``python processor_loader.py MODEL`` loads the processor the
local renderer would load for MODEL in a fresh process (data/render/render.py
``processor_for``, with this process's environment as the parent left it) and prints its class
name."""

from __future__ import annotations

import sys

from speculators_qwen_compat.data.render import render

if __name__ == "__main__":
    print(type(render.processor_for(sys.argv[1])).__name__)
