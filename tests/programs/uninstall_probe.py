"""install() then uninstall() twice, comparing every speculators name by identity:
``uninstall_probe.py`` with the venv-wide .pth off (test_uninstall.py).

A: preprocessing imported, the fixes on, then the CLI module (0.8+) imported, so it binds our
wrapper with ``from ... import``; off again. B: everything imported, on and off again. Prints
one JSON line: per round the names changed or left wrapped after uninstall(), whether the CLI
bound the wrapper and got the original back, and how many names B wrapped in between."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from types import ModuleType
from typing import Any

import wrapt

import speculators_qwen_compat as compat

PROXIES = tuple(
    getattr(wrapt, name)
    for name in ("ObjectProxy", "BaseObjectProxy", "FunctionWrapper")
    if hasattr(wrapt, name)
)
Snapshot = dict[tuple[str, str], Any]


def speculators_modules() -> dict[str, ModuleType]:
    return {
        name: module
        for name, module in list(sys.modules.items())
        if module is not None and (name == "speculators" or name.startswith("speculators."))
    }


def snapshot() -> Snapshot:
    """Every module attribute, and every attribute in the own dict of the classes those modules
    define (a fix may wrap a method: it must come back, and nothing may stay pinned on a
    subclass that only inherited it)."""
    names: Snapshot = {}
    for name, module in speculators_modules().items():
        for attribute, value in list(vars(module).items()):
            names[(name, attribute)] = value
            if isinstance(value, type) and value.__module__ == name:
                for class_attribute, class_value in list(vars(value).items()):
                    names[(name, f"{attribute}.{class_attribute}")] = class_value
    return names


def changed(before: Snapshot) -> list[str]:
    """Names of modules present before whose value differs or vanished, and class attributes
    that appeared (a method pinned on a class that only inherited it)."""
    after = snapshot()
    modules = {name for name, _ in before}
    out = [key for key, value in before.items() if key not in after or after[key] is not value]
    out += [key for key in after.keys() - before.keys() if key[0] in modules and "." in key[1]]
    return sorted(f"{name}.{attribute}" for name, attribute in out)


def wrappers() -> list[str]:
    return sorted(
        f"{name}.{attribute}"
        for name, module in speculators_modules().items()
        for attribute, value in vars(module).items()
        if isinstance(value, PROXIES)
    )


def main(argv: list[str]) -> int:
    # Looked up on disk: find_spec("speculators.cli...") would import the CLI package too early.
    spec = importlib.util.find_spec("speculators")
    assert spec is not None and spec.submodule_search_locations is not None
    root = spec.submodule_search_locations[0]
    has_cli = os.path.isfile(os.path.join(root, "cli", "prepare_data.py"))
    out: dict[str, Any] = {"has_cli": has_cli}
    import speculators.data_generation.preprocessing as preprocessing

    assert "speculators.cli.prepare_data" not in sys.modules
    before = snapshot()
    compat.install()
    if has_cli:
        cli = importlib.import_module("speculators.cli.prepare_data")  # the package shadows it
        out["bound_wrapper"] = isinstance(cli.load_and_preprocess_dataset, PROXIES)
    compat.uninstall()
    out["a_changed"] = changed(before)
    out["a_wrappers"] = wrappers()
    if has_cli:
        original = preprocessing.load_and_preprocess_dataset
        out["a_cli_is_original"] = cli.load_and_preprocess_dataset is original
    before = snapshot()
    compat.install()
    out["b_patched"] = len(wrappers())
    compat.uninstall()
    out["b_changed"] = changed(before)
    out["b_wrappers"] = wrappers()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
