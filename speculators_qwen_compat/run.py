"""``python -m speculators_qwen_compat.run``: public entry point (code: cli/run.py)."""

import sys

from speculators_qwen_compat.cli.run import main

if __name__ == "__main__":
    sys.exit(main())
