"""Imported by the one-line ``speculators_qwen_compat.pth`` in every interpreter of the venv.

It reads the switch (``SPECULATORS_QWEN_COMPAT=off``) and leaves a finder that installs the fixes
at the first import of speculators (startup.py): nothing heavy at start-up. The ``.pth`` line
guards this import, so a half-uninstalled package costs no traceback either.
"""

try:
    from speculators_qwen_compat.core.startup import defer, switched_off_by_env

    _off, _disabled = switched_off_by_env()
    if not _off:
        defer(_disabled)
except Exception:  # a broken shim must never stop the interpreter from starting
    pass
