"""Registering the fixes as post-import hooks, applying them, and taking them back.

Nothing here imports upstream or a fix (``FixEntry``: its class a "module:Class" string, imported
when wrapt reports a module it targets imported). A fix that does not fit, or raises applying, is
recorded and skipped: a hook error would otherwise surface as an ImportError of upstream's own."""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable
from types import ModuleType

from speculators_qwen_compat.core import startup as _startup
from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.core.fix import (
    FixEntry,
    FixState,
    FixStatus,
    NothingToPatch,
    Patcher,
    Verdict,
)
from speculators_qwen_compat.core.startup import (
    ENV_SWITCH,
    switch_value,
    switched_off_by_env,
)
from speculators_qwen_compat.core.targets import check

log = logging.getLogger("speculators_qwen_compat")


class _Registry:
    def __init__(self, fixes: Iterable[FixEntry]) -> None:
        self.fixes = list(fixes)
        self.lock = threading.RLock()
        self.active = False
        self.disabled: set[str] = set()
        self.hooked: set[tuple[str, str]] = set()
        # One journal for every fix: fixes wrapping the same function must unwind in reverse.
        self.patcher = Patcher()
        #: Per fix name, its verdict in this interpreter (``status`` adds what it shows).
        self.states: dict[str, Verdict] = {}
        self.applied_to: set[tuple[str, str]] = set()

    def on_import(self, entry: FixEntry, module_name: str, module: ModuleType) -> None:
        with self.lock:
            if not self.active or entry.name in self.disabled:
                return
            if (entry.name, module_name) in self.applied_to:
                return
            self.applied_to.add((entry.name, module_name))
            primary = module_name == entry.modules[0]
            found = None
            try:
                fix = entry.load()  # the fix's class, imported now that its target is
            except Exception as exc:
                verdict = Verdict(
                    FixState.FAILED, f"importing {entry.where} raised {type(exc).__name__}: {exc}"
                )
                log.warning("fix %s not applied to %s: %s", entry.name, module_name, verdict.reason)
            else:
                try:
                    verdict, found = check(fix, module_name, module)
                except Exception as exc:  # a shape check must never break upstream's import
                    verdict = Verdict(
                        FixState.FAILED, f"shape check raised {type(exc).__name__}: {exc}"
                    )
            if verdict.state == FixState.APPLIED and found is not None:
                mark = self.patcher.mark()
                try:
                    fix.apply(found, self.patcher)
                except NothingToPatch as exc:
                    self.patcher.restore(mark)
                    verdict = Verdict(FixState.NOT_NEEDED, str(exc))
                except Exception as exc:
                    self.patcher.restore(mark)  # a half-applied fix is no fix
                    verdict = Verdict(
                        FixState.FAILED, f"applying raised {type(exc).__name__}: {exc}"
                    )
                    log.warning(
                        "fix %s not applied to %s: %s", fix.name, module_name, verdict.reason
                    )
            if primary or entry.name not in self.states or verdict.state == FixState.FAILED:
                self.states[entry.name] = verdict

    @staticmethod
    def status_of(entry: FixEntry, state: FixState, reason: str) -> FixStatus:
        """A fix's status, with the tested releases it applies on (read from its class, imported
        here if it was not yet; none shown when it cannot be)."""
        try:
            tested = str(entry.load().applies_on or "")
        except Exception:  # the reason says why elsewhere; status still lists the fix
            tested = ""
        return FixStatus(entry.name, state, reason, tested)

    def status(self, entry: FixEntry) -> FixStatus | None:
        """``entry``'s status in this interpreter; None before install()."""
        verdict = self.states.get(entry.name)
        if verdict is None:
            return None
        return self.status_of(entry, verdict.state, verdict.reason)

    def install(self, disabled: Iterable[str]) -> None:
        """Activate every fix but ``disabled``. Called again while active with another set, it
        applies the new set: the journal is unwound and the fixes still on are applied again in
        their order (a fix switched off must leave no wrapper behind, even under a later one)."""
        with self.lock:
            wanted = set(disabled)
            known = [f.name for f in self.fixes]
            unknown = wanted - set(known)
            if unknown:
                _startup.say(
                    f"warning: no fix named {', '.join(sorted(unknown))} to switch off "
                    f"(fixes: {', '.join(known)})"
                )
            if self.active:
                if wanted != self.disabled:
                    self._reapply(wanted)
                return
            try:
                import wrapt  # noqa: F401 (here, not at import time: the .pth must survive a missing wrapt)
            except ImportError as exc:
                _startup.activation_error = (
                    f"wrapt is not installed in this Python ({sys.executable}): {exc}; "
                    "pip install wrapt"
                )
                raise CompatError(_startup.activation_error) from exc
            _startup.activation_error = None

            self.active = True
            self._switch_to(wanted)

    def _mark_states(self) -> None:
        for fix in self.fixes:
            if fix.name in self.disabled:
                reason = f"switched off by {ENV_SWITCH} or install(disable=...)"
                self.states[fix.name] = Verdict(FixState.DISABLED, reason)
            elif self.states.get(fix.name, Verdict(FixState.DISABLED, "")).state == (
                FixState.DISABLED
            ):
                reason = f"waits for {fix.modules[0]} to be imported"
                self.states[fix.name] = Verdict(FixState.PENDING, reason)

    def _switch_to(self, disabled: set[str]) -> None:
        """Hook every fix not in ``disabled`` (once per process) and apply it to the modules
        already imported, in the fixes' order."""
        import wrapt

        self.disabled = disabled
        self._mark_states()
        for fix in self.fixes:
            if fix.name in self.disabled:
                continue
            for module_name in fix.modules:
                if (fix.name, module_name) not in self.hooked:
                    self.hooked.add((fix.name, module_name))
                    wrapt.register_post_import_hook(_hook_for(self, fix, module_name), module_name)
        # Hooks registered during an earlier install() do not fire again for modules that are
        # already imported: apply those directly.
        for fix in self.fixes:
            for module_name in fix.modules:
                module = sys.modules.get(module_name)
                if module is not None:
                    self.on_import(fix, module_name, module)

    def _reapply(self, wanted: set[str]) -> None:
        """Another set of disabled fixes while active: unwind the journal (newest first, so
        stacked wrappers come off cleanly) and apply the fixes still on, in their order."""
        before = self.disabled
        self.patcher.restore()
        self.applied_to.clear()
        self.states.clear()
        self._switch_to(wanted)
        log.info(
            "fixes switched off: %s; switched back on: %s",
            ", ".join(sorted(wanted - before)) or "none",
            ", ".join(sorted(before - wanted)) or "none",
        )
        # Child interpreters (map workers, ranks) read the switch: they follow the new set.
        if os.environ.get(ENV_SWITCH) is not None and not switched_off_by_env()[0]:
            os.environ[ENV_SWITCH] = switch_value(wanted)

    def uninstall(self) -> None:
        with self.lock:
            self.patcher.restore()
            self.applied_to.clear()
            self.states.clear()
            self.active = False


def _hook_for(
    registry: _Registry, entry: FixEntry, module_name: str
) -> Callable[[ModuleType], None]:
    def hook(module: ModuleType) -> None:
        try:
            registry.on_import(entry, module_name, module)
        except Exception:  # never let a hook fail upstream's import
            log.exception("speculators_qwen_compat hook for %s failed", entry.name)

    return hook


_registry: _Registry | None = None


def registry() -> _Registry:
    """The one registry, its fixes (``FixEntry``: names, target modules, "module:Class") read on
    first use from the catalogue the package handed down (startup.hand_catalogue: core imports
    nothing above it); each fix's class is imported when a module it targets is."""
    global _registry
    _startup.settle()  # the .pth's install, if it still waits for speculators to be imported
    if _registry is None:
        _registry = _Registry(_startup.catalogue())
    return _registry
