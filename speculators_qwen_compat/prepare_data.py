"""``python -m speculators_qwen_compat.prepare_data``: entry point (code: cli/prepare_data.py)."""

import sys

from speculators_qwen_compat.cli import frozen_imports
from speculators_qwen_compat.cli.prepare_data import main

if __name__ == "__main__":
    code = main()
    frozen_imports.freeze()  # the run's own objects too: the exit skips a collection over them
    sys.exit(code)
