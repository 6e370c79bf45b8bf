"""A script for ``python -m speculators_qwen_compat.run`` (test_drop_in.py): prints its
``sys.argv`` and whether the fixes are installed."""

from __future__ import annotations

import sys

import speculators_qwen_compat

print(sys.argv, speculators_qwen_compat.installed())
