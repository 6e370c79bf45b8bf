"""``python -m speculators_qwen_compat.prepare_data``: entry point (code: cli/prepare_data.py)."""

from speculators_qwen_compat.cli import frozen_imports
from speculators_qwen_compat.cli.prepare_data import main

if __name__ == "__main__":
    frozen_imports.exit_with(main())
