"""uninstall() puts every original back, by identity, in every speculators module: also the
name upstream's CLI module binds with ``from ... import`` after our hook wrapped its source."""

from __future__ import annotations

import json

from conftest import run_python

PROBE = r"""
import importlib, importlib.util, json, sys, wrapt
import speculators_qwen_compat as compat

def speculators_modules():
    return {n: m for n, m in list(sys.modules.items())
            if m is not None and (n == "speculators" or n.startswith("speculators."))}

def snapshot():
    # Every module attribute, and every attribute in the own dict of the classes those modules
    # define (a fix may wrap a method: it must come back, and nothing may stay pinned on a
    # subclass that only inherited it).
    names = {}
    for n, m in speculators_modules().items():
        for a, v in list(vars(m).items()):
            names[(n, a)] = v
            if isinstance(v, type) and v.__module__ == n:
                for ca, cv in list(vars(v).items()):
                    names[(n, f"{a}.{ca}")] = cv
    return names

def changed(before):
    # Names of modules present before whose value differs or vanished, and class attributes
    # that appeared (a method pinned on a class that only inherited it).
    after = snapshot()
    modules = {n for n, _ in before}
    out = [k for k, v in before.items() if k not in after or after[k] is not v]
    out += [k for k in after.keys() - before.keys() if k[0] in modules and "." in k[1]]
    return sorted(f"{n}.{a}" for n, a in out)

PROXIES = tuple(getattr(wrapt, n) for n in ("ObjectProxy", "BaseObjectProxy", "FunctionWrapper")
                if hasattr(wrapt, n))

def wrappers():
    return sorted(f"{n}.{a}" for n, m in speculators_modules().items()
                  for a, v in vars(m).items() if isinstance(v, PROXIES))

import os
# Looked up on disk: find_spec("speculators.cli...") would import the CLI package too early.
root = importlib.util.find_spec("speculators").submodule_search_locations[0]
has_cli = os.path.isfile(os.path.join(root, "cli", "prepare_data.py"))
out = {}
# A: the CLI module is imported after the fixes are on, so it binds our wrapper.
import speculators.data_generation.preprocessing as P
assert "speculators.cli.prepare_data" not in sys.modules
before = snapshot()
compat.install()
if has_cli:
    C = importlib.import_module("speculators.cli.prepare_data")  # the package shadows the name
    out["bound_wrapper"] = isinstance(C.load_and_preprocess_dataset, PROXIES)
compat.uninstall()
out["a_changed"] = changed(before)
out["a_wrappers"] = wrappers()
if has_cli:
    out["a_cli_is_original"] = C.load_and_preprocess_dataset is P.load_and_preprocess_dataset
# B: everything imported first, then on and off again.
before = snapshot()
compat.install()
out["b_patched"] = len(wrappers())
compat.uninstall()
out["b_changed"] = changed(before)
out["b_wrappers"] = wrappers()
out["has_cli"] = has_cli
print(json.dumps(out))
"""


def test_uninstall_restores_every_name_by_identity() -> None:
    result = run_python(PROBE, SPECULATORS_QWEN_COMPAT="off")
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["a_changed"] == [] and out["a_wrappers"] == []
    assert out["b_changed"] == [] and out["b_wrappers"] == []
    assert out["b_patched"] >= 3  # the fixes were really on in between
    if out["has_cli"]:
        assert out["bound_wrapper"] is True  # the case under test happened
        assert out["a_cli_is_original"] is True
