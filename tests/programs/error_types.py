"""The exception types ``load_raw_dataset`` raises with the fixes on: ``error_types.py FOLDER``.

FOLDER gets a file that is not data; the program reads FOLDER (no data file in it) and a
missing file in it. Prints one JSON line: per case (``folder``, ``file``) the exception's
base class, whether it is a ValueError, a FileNotFoundError and our CompatError, and its text
(test_data_formats.py: callers of upstream catch the types upstream raises)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import speculators_qwen_compat
from speculators_qwen_compat.core.errors import CompatError


def main(argv: list[str]) -> int:
    folder = Path(argv[0])
    (folder / "notes.txt").write_text("x")
    speculators_qwen_compat.install()
    from speculators.data_generation import preprocessing

    out = {}
    for label, spec in (("folder", folder), ("file", folder / "missing.jsonl")):
        try:
            preprocessing.load_raw_dataset(str(spec))
        except Exception as exc:
            out[label] = [
                type(exc).__mro__[1].__name__,
                isinstance(exc, ValueError),
                isinstance(exc, FileNotFoundError),
                isinstance(exc, CompatError),
                str(exc),
            ]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
