"""Imported by the one-line ``speculators_qwen_compat.pth`` in every interpreter of the venv.

It only registers import hooks (no torch, transformers, datasets or speculators import), unless
``SPECULATORS_QWEN_COMPAT=0`` switches the venv-wide activation off.
"""

from speculators_qwen_compat.activation import switched_off_by_env

_off, _disabled = switched_off_by_env()
if not _off:
    try:
        from speculators_qwen_compat import install

        install(_disabled)
    except Exception:  # a broken shim must never stop the interpreter from starting
        pass
