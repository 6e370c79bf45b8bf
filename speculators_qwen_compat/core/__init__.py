"""Activation core: what a fix is (fix.py), the registry of post-import hooks (registry.py), the
switch and the ``.pth`` start-up (startup.py, autoload.py), the release table (releases.py), our
error type (errors.py) and upstream's module names (upstream.py). The bottom floor: nothing here
imports or names the package's other parts (tests/test_core_layering.py); the fix catalogue is
handed down by the package's ``__init__``.
"""
