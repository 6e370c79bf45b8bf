"""Whether the venv's start-up switched the fixes on: ``activation_probe.py [--status]``.

Imports upstream's preprocessing and prints one JSON line, [wrapped, installed]: whether
``_preprocess_batch`` is wrapped and whether the fixes are installed. With ``--status`` it then
runs ``status --json`` (its JSON follows on the next lines) (test_activation.py)."""

from __future__ import annotations

import json
import sys

import speculators.data_generation.preprocessing as preprocessing

import speculators_qwen_compat


def main(argv: list[str]) -> int:
    wrapped = hasattr(preprocessing._preprocess_batch, "__wrapped__")
    print(json.dumps([wrapped, speculators_qwen_compat.installed()]))
    if "--status" in argv:
        from speculators_qwen_compat.__main__ import main as command

        return command(["status", "--json"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
