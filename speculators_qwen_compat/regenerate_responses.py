"""``python -m speculators_qwen_compat.regenerate_responses``: entry point (code:
cli/regenerate_responses.py)."""

from speculators_qwen_compat.cli import frozen_imports
from speculators_qwen_compat.cli.regenerate_responses import main

if __name__ == "__main__":
    frozen_imports.exit_with(main())
