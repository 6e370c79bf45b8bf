"""Registering the fixes as post-import hooks, applying them, and taking them back.

Nothing here imports upstream: each fix names the modules it targets, and wrapt calls the fix
when such a module finishes importing (or at once, if it already has). A fix that does not fit
the installed release, or that raises while applying, is recorded and skipped: a hook error
would otherwise surface as an ImportError of upstream's own module.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterable
from types import ModuleType

from speculators_qwen_compat.core import startup as _startup
from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.core.fix import (  # noqa: F401 (re-exported for callers)
    APPLIED,
    DISABLED,
    FAILED,
    NOT_APPLICABLE,
    NOT_NEEDED,
    PENDING,
    Fits,
    Fix,
    FixStatus,
    Patcher,
    applies,
    not_applicable,
    not_needed,
)
from speculators_qwen_compat.core.startup import ENV_SWITCH, switched_off_by_env  # noqa: F401

log = logging.getLogger("speculators_qwen_compat")


class _Registry:
    def __init__(self, fixes: Iterable[Fix]) -> None:
        self.fixes = list(fixes)
        self.lock = threading.RLock()
        self.active = False
        self.disabled: set[str] = set()
        self.hooked: set[tuple[str, str]] = set()
        # One journal for every fix: fixes wrapping the same function must unwind in reverse.
        self.patcher = Patcher()
        self.states: dict[str, FixStatus] = {}
        self.applied_to: set[tuple[str, str]] = set()

    def on_import(self, fix: Fix, module_name: str, module: ModuleType) -> None:
        with self.lock:
            if not self.active or fix.name in self.disabled:
                return
            if (fix.name, module_name) in self.applied_to:
                return
            self.applied_to.add((fix.name, module_name))
            primary = module_name == fix.modules[0]
            try:
                fits = fix.fits(module_name, module)
            except Exception as exc:  # a shape check must never break upstream's import
                fits = Fits(FAILED, f"shape check raised {type(exc).__name__}: {exc}")
            if fits.state == APPLIED:
                mark = self.patcher.mark()
                try:
                    fix.apply(module_name, module, self.patcher)
                except Exception as exc:
                    self.patcher.restore(mark)  # a half-applied fix is no fix
                    fits = Fits(FAILED, f"applying raised {type(exc).__name__}: {exc}")
                    log.warning("fix %s not applied to %s: %s", fix.name, module_name, fits.reason)
            if primary or fix.name not in self.states or fits.state == FAILED:
                self.states[fix.name] = FixStatus(fix.name, fits.state, fits.reason)

    def install(self, disabled: Iterable[str]) -> None:
        with self.lock:
            self.disabled = set(disabled)
            known = [f.name for f in self.fixes]
            unknown = self.disabled - set(known)
            if unknown:
                _startup.say(
                    f"warning: no fix named {', '.join(sorted(unknown))} to switch off "
                    f"(fixes: {', '.join(known)})"
                )
            if self.active:
                return
            try:
                import wrapt  # here, not at import time: the .pth must survive a missing wrapt
            except ImportError as exc:
                _startup.activation_error = (
                    f"wrapt is not installed in this Python ({sys.executable}): {exc}; "
                    "pip install wrapt"
                )
                raise CompatError(_startup.activation_error) from exc
            _startup.activation_error = None

            self.active = True
            for fix in self.fixes:
                if fix.name in self.disabled:
                    self.states[fix.name] = FixStatus(
                        fix.name, DISABLED, f"switched off by {ENV_SWITCH}"
                    )
                    continue
                self.states.setdefault(
                    fix.name,
                    FixStatus(fix.name, PENDING, f"waits for {fix.modules[0]} to be imported"),
                )
                for module_name in fix.modules:
                    if (fix.name, module_name) in self.hooked:
                        continue
                    self.hooked.add((fix.name, module_name))
                    wrapt.register_post_import_hook(_hook_for(self, fix, module_name), module_name)
            # Hooks registered during an earlier install() do not fire again for modules that
            # are already imported: apply those directly.
            for fix in self.fixes:
                for module_name in fix.modules:
                    module = sys.modules.get(module_name)
                    if module is not None:
                        self.on_import(fix, module_name, module)

    def uninstall(self) -> None:
        with self.lock:
            self.patcher.restore()
            self.applied_to.clear()
            self.states.clear()
            self.active = False


def _hook_for(registry: _Registry, fix: Fix, module_name: str) -> Callable[[ModuleType], None]:
    def hook(module: ModuleType) -> None:
        try:
            registry.on_import(fix, module_name, module)
        except Exception:  # never let a hook fail upstream's import
            log.exception("speculators_qwen_compat hook for %s failed", fix.name)

    return hook


_registry: _Registry | None = None


def registry() -> _Registry:
    global _registry
    _startup.settle()  # the .pth's install, if it still waits for speculators to be imported
    if _registry is None:
        from speculators_qwen_compat.fixes import ALL_FIXES

        _registry = _Registry(fix_class() for fix_class in ALL_FIXES)
    return _registry
