"""Run-time fixes that make vllm-project/speculators' data preparation work for Qwen3.5/3.6.

``install()`` registers one post-import hook per fix; each fix is applied when its upstream
module is imported (or at once if it already is), and only where the module has the shape the
fix relies on. ``uninstall()`` puts every original back. Importing this package imports nothing
heavy, so the venv-wide ``.pth`` costs next to nothing at start-up.
"""

from __future__ import annotations

from collections.abc import Iterable

from speculators_qwen_compat.activation import FixStatus, registry, switched_off_by_env

__version__ = "0.1.0"
__all__ = ["FixStatus", "__version__", "install", "installed", "status", "uninstall"]


def install(disable: Iterable[str] | None = None) -> None:
    """Switch the fixes on (idempotent). ``disable`` names fixes to leave off; by default the
    names listed in ``SPECULATORS_QWEN_COMPAT`` are left off."""
    if disable is None:
        _, disable = switched_off_by_env()
    registry().install(disable)


def uninstall() -> None:
    """Put back every upstream attribute the fixes replaced (idempotent)."""
    registry().uninstall()


def installed() -> bool:
    return registry().active


def status() -> list[FixStatus]:
    """Per fix: applied, not-needed, not-applicable, disabled, failed or pending, with a reason."""
    reg = registry()
    return [
        reg.states.get(fix.name, FixStatus(fix.name, "inactive", "install() has not been called"))
        for fix in reg.fixes
    ]
