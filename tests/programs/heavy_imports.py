"""What start-up imports (test_drop_in.py): prints one JSON line, [installed, heavy], whether
the .pth installed the fixes and which of HEAVY are imported once ``speculators_qwen_compat``
is imported and activated: none may be, start-up must stay cheap."""

from __future__ import annotations

import json
import sys

import speculators_qwen_compat

HEAVY = ("torch", "transformers", "datasets", "speculators", "jinja2", "numpy")

if __name__ == "__main__":
    installed = speculators_qwen_compat.installed()  # activation too must import nothing heavy
    print(json.dumps([installed, [name for name in HEAVY if name in sys.modules]]))
