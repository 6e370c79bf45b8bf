"""Imported by the one-line ``speculators_qwen_compat.pth`` in every interpreter of the venv.

It only reads the switch and leaves a finder that installs the fixes at the first import of
speculators (startup.py): no wrapt, logging, torch, transformers, datasets or speculators
import at start-up. ``SPECULATORS_QWEN_COMPAT=0`` switches the venv-wide activation off.
"""

try:
    from speculators_qwen_compat.core.startup import defer, switched_off_by_env

    _off, _disabled = switched_off_by_env()
    if not _off:
        defer(_disabled)
except Exception:  # a broken shim must never stop the interpreter from starting
    pass
