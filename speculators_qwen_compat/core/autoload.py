"""Imported by the one-line ``speculators_qwen_compat.pth`` in every interpreter of the venv.

It only reads the switch and leaves a finder that installs the fixes at the first import of
speculators (startup.py): no wrapt, logging, torch, transformers, datasets or speculators
import at start-up. ``SPECULATORS_QWEN_COMPAT=off`` switches the venv-wide activation off.
The ``.pth`` line guards this import itself, so a half-uninstalled package (this module gone)
costs no traceback at start-up either.
"""

try:
    from speculators_qwen_compat.core.startup import defer, switched_off_by_env

    _off, _disabled = switched_off_by_env()
    if not _off:
        defer(_disabled)
except Exception:  # a broken shim must never stop the interpreter from starting
    pass
