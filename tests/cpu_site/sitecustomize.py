"""Test-only start-up of a training subprocess on CPU (tests/cpu_trainer.py); never shipped.

A test or the bench puts this folder and tests/ first on PYTHONPATH of its training subprocesses
only (``python -m speculators_qwen_compat.train ...``, ``python -m speculators.train ...``)."""

try:
    import cpu_trainer
    import wrapt  # noqa: F401
except ImportError:  # not a training interpreter of the test venvs
    pass
else:
    cpu_trainer.register()
