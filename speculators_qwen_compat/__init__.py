"""Run-time fixes that make vllm-project/speculators' data preparation work for Qwen3.5/3.6.

``install()`` registers one post-import hook per fix, applied when its upstream module is
imported and only where it has the shape the fix relies on; ``uninstall()`` puts every original
back. Importing this package imports nothing heavy, so the venv-wide ``.pth`` costs next to nothing.
"""

from __future__ import annotations

from speculators_qwen_compat.core import startup as _startup

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up
if TYPE_CHECKING:
    from collections.abc import Iterable

    from speculators_qwen_compat.core.fix import FixEntry, FixStatus

__version__ = "0.1.0"
__all__ = ["FixStatus", "__version__", "install", "installed", "status", "uninstall"]


def _fix_catalogue() -> tuple[FixEntry, ...]:
    """The fixes, in the order they apply (fixes/__init__.py), read when the registry is first
    used: each a name, its target modules and "module:Class" (no fix imported); handed down to
    core, which imports nothing above it."""
    from speculators_qwen_compat.fixes import ALL_FIXES

    return ALL_FIXES


_startup.hand_catalogue(_fix_catalogue)


def __getattr__(name: str) -> object:
    # The .pth imports this package in every interpreter: activation (logging, threading,
    # dataclasses) is imported on first use, not then.
    if name == "FixStatus":
        from speculators_qwen_compat.core.fix import FixStatus

        return FixStatus
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def install(disable: Iterable[str] | None = None) -> None:
    """Switch the fixes on (idempotent). ``disable`` names fixes to leave off; by default the
    names in ``SPECULATORS_QWEN_COMPAT=off:NAME,NAME`` are left off. Raises CompatError when
    the fixes cannot be activated (wrapt missing)."""
    from speculators_qwen_compat.core.registry import registry
    from speculators_qwen_compat.core.startup import switched_off_by_env

    if disable is None:
        _, disable = switched_off_by_env()
    registry().install(disable)


def uninstall() -> None:
    """Put back every upstream attribute the fixes replaced (idempotent)."""
    from speculators_qwen_compat.core.registry import registry

    registry().uninstall()


def installed() -> bool:
    from speculators_qwen_compat.core.registry import registry

    return registry().active


def status(resolve: bool = True) -> list[FixStatus]:
    """Per fix: applied, not-needed, not-applicable, disabled, failed or pending, with a reason.

    With ``resolve``, a fix still waiting for its module is settled: the module is imported
    (which applies the fix) or, when the installed release has no such module, the fix is
    reported not-needed.
    """
    from speculators_qwen_compat.core import startup
    from speculators_qwen_compat.core.fix import FixState
    from speculators_qwen_compat.core.registry import registry

    reg = registry()
    if not reg.active and startup.activation_error:
        reason = f"activation failed: {startup.activation_error}"
        return [reg.status_of(fix, FixState.FAILED, reason) for fix in reg.fixes]
    if resolve and reg.active:
        for fix in reg.fixes:
            verdict = reg.states.get(fix.name)
            if verdict is not None and verdict.state == FixState.PENDING:
                _import_target(fix.modules[0])
    out = []
    for fix in reg.fixes:
        state = reg.status(fix) or reg.status_of(fix, FixState.INACTIVE, "install() not called")
        if resolve and state.state == FixState.PENDING:
            state = reg.status_of(fix, FixState.NOT_NEEDED, f"this release has no {fix.modules[0]}")
        out.append(state)
    return out


def _import_target(module_name: str) -> None:
    import contextlib
    import importlib

    with contextlib.suppress(ImportError):
        importlib.import_module(module_name)
