"""``python -m speculators_qwen_compat.train``: public entry point (code: cli/train.py)."""

import sys

from speculators_qwen_compat.cli.train import main

if __name__ == "__main__":
    sys.exit(main())
