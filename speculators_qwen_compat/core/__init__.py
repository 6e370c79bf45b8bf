"""Activation core: what a fix is (fix.py), the registry of post-import hooks (registry.py), the
environment switch and the ``.pth`` start-up (startup.py, autoload.py), the release table
(releases.py), our error type (errors.py) and the names of upstream's modules (upstream.py).

The bottom floor: nothing here imports the package's other parts, nor names them in a string
(tests/test_core_layering.py); what core needs from above (the fix catalogue) is handed down by
the package's ``__init__``."""
