"""Which fix modules are imported when (test_startup.py): prints one JSON line with the fix
modules imported once ``install()`` ran (speculators not imported yet), then, after importing
upstream's preprocessing module, per fix whether its class's module is imported and whether
any module it targets is."""

from __future__ import annotations

import importlib
import json
import sys


def _fix_modules() -> list[str]:
    return sorted(
        name
        for name in sys.modules
        if name.startswith("speculators_qwen_compat.fixes.") and name.count(".") > 2
    )


def main() -> None:
    import speculators_qwen_compat
    from speculators_qwen_compat.fixes import ALL_FIXES

    speculators_qwen_compat.install()
    at_install = _fix_modules()
    importlib.import_module("speculators.data_generation.preprocessing")
    after = {
        entry.name: {
            "class_imported": entry.where.partition(":")[0] in sys.modules,
            "target_imported": any(module in sys.modules for module in entry.modules),
        }
        for entry in ALL_FIXES
    }
    print(json.dumps({"at_install": at_install, "after": after}))


if __name__ == "__main__":
    main()
