"""``python -m speculators_qwen_compat.run SCRIPT|-m MODULE [ARGS]``: anything, fixes on.

Installs the fixes and runs the target as ``__main__`` with runpy; its children activate the fixes
through the .pth. Our own problems are one line; whatever the target raises propagates as Python
shows it, exit code included.
"""

from __future__ import annotations

import os
import runpy
import sys

from speculators_qwen_compat.cli.support import (
    DEBUG_ENV_HINT,
    activate,
    debug_requested,
    run_main,
)
from speculators_qwen_compat.core.errors import CompatError

USAGE = "usage: python -m speculators_qwen_compat.run SCRIPT|-m MODULE [ARGS ...]"


def run_target(args: list[str]) -> int:
    """Run ``SCRIPT ARGS`` or ``-m MODULE ARGS`` in this process as ``__main__``."""
    if args[:1] == ["-m"]:
        if len(args) < 2:
            raise CompatError(f"-m needs a module name; {USAGE}")
        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        return 0
    script = args[0]
    if not os.path.isfile(script):
        raise CompatError(f"no such script: {script}")
    sys.argv = [script, *args[1:]]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2

    def body() -> int:
        activate()
        return run_target(args)

    return run_main(body, debug_requested(), DEBUG_ENV_HINT, ours_only=True)


if __name__ == "__main__":
    sys.exit(main())
