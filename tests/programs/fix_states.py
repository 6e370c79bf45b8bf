"""Each fix's state in a fresh interpreter: ``fix_states.py [--settled]``. Prints one JSON line,
fix name -> state. By default ``status()`` (a fix waiting for its module imports it);
``--settled`` only settles the .pth's waiting install and reads ``status(resolve=False)``,
importing nothing of the release (test_startup.py, test_activation.py)."""

from __future__ import annotations

import json
import sys

import speculators_qwen_compat
from speculators_qwen_compat.core import startup


def main(argv: list[str]) -> int:
    settled = "--settled" in argv
    if settled:
        startup.settle()
    states = speculators_qwen_compat.status(resolve=not settled)
    print(json.dumps({fix.name: fix.state for fix in states}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
