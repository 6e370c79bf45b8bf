"""A start-up that sees only the standard library and one site folder: ``python -I -S
isolated_start.py SITE WHAT`` (test_startup.py). SITE is processed as start-up processes
site-packages (its ``.pth`` files run). WHAT: ``started`` prints ``started``; ``status``
imports speculators and prints ``status_report()`` as one JSON line.

Standard library only: under ``-I`` neither this folder nor PYTHONPATH is on ``sys.path``."""

from __future__ import annotations

import json
import site
import sys


def main(argv: list[str]) -> int:
    folder, what = argv
    site.addsitedir(folder)
    if what == "started":
        print("started")
        return 0
    import speculators  # noqa: F401 (the first import of the release: the .pth's trigger)

    from speculators_qwen_compat.__main__ import status_report

    print(json.dumps(status_report()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
