"""Run as ``python resave_drafter.py SRC DST`` with the fixes on: load a saved drafter through
upstream's ``SpeculatorModel.from_pretrained`` and save it again, no training in between (what a
user does to "save with the fixes on"). The log lines go to stderr."""

from __future__ import annotations

import logging
import sys

from speculators.model import SpeculatorModel

import speculators_qwen_compat


def main(source: str, target: str) -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    speculators_qwen_compat.install()
    SpeculatorModel.from_pretrained(source).save_pretrained(target)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
