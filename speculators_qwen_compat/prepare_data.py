"""``python -m speculators_qwen_compat.prepare_data``: entry point (code: cli/prepare_data.py)."""

import sys

from speculators_qwen_compat.cli.prepare_data import main

if __name__ == "__main__":
    sys.exit(main())
