"""What the venv-wide ``.pth`` does at interpreter start-up: read the switch, and defer the
install to the first import of speculators.

The ``.pth`` runs in every interpreter of the venv (``python -c pass``, pip, every tool), so it
must cost next to nothing: registering the import hooks at start-up would import wrapt, logging
and every fix, about 50 ms, more than a bare interpreter takes to start. Instead a finder that
finds nothing goes first on ``sys.meta_path``; it only compares each imported name with
``speculators`` and, the first time speculators is looked for (every fix targets a module inside
it), installs the fixes with the switch as read at start-up, before any of speculators loads.
``registry.registry()`` settles a waiting install too, so ``install()``, ``uninstall()``,
``installed()`` and ``status()`` behave as if the fixes had been installed at start-up.

Only ``os`` and ``sys`` are imported here.
"""

from __future__ import annotations

import os
import sys

#: Environment switch. Unset or "1": everything on. "0"/"off"/"false": the .pth stays idle.
#: Any other value is a comma list of fix names to leave off (a leading "-" is accepted).
ENV_SWITCH = "SPECULATORS_QWEN_COMPAT"
#: The package holding every module a fix targets.
TRIGGER = "speculators"

#: Names of the fixes to leave off, while an install waits; None when none waits.
_waiting: set[str] | None = None


def switched_off_by_env(environ: dict[str, str] | None = None) -> tuple[bool, set[str]]:
    """Read ENV_SWITCH: (whole package off for the .pth, names of fixes switched off)."""
    value = (environ if environ is not None else os.environ).get(ENV_SWITCH, "").strip()
    if value.lower() in ("0", "off", "false", "no"):
        return True, set()
    if value.lower() in ("", "1", "on", "true", "yes"):
        return False, set()
    return False, {part.strip().lstrip("-") for part in value.split(",") if part.strip()}


class _FirstImportOfSpeculators:
    """A ``sys.meta_path`` entry that never finds a module: it settles the waiting install when
    speculators is looked for, then stays inert (it is not removed while the import system may
    be iterating over ``sys.meta_path``)."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        if _waiting is not None and (name == TRIGGER or name.startswith(TRIGGER + ".")):
            settle()
        return None


def defer(disabled: set[str]) -> None:
    """Install the fixes (leaving ``disabled`` off) when speculators is first imported."""
    global _waiting
    _waiting = set(disabled)
    if _FirstImportOfSpeculators not in sys.meta_path:
        sys.meta_path.insert(0, _FirstImportOfSpeculators)


def settle() -> None:
    """Run the waiting install now; nothing when none waits."""
    global _waiting
    disabled, _waiting = _waiting, None
    if disabled is None:
        return
    try:
        from speculators_qwen_compat import install

        install(disabled)
    except Exception:  # a broken shim must never break the import that triggered it
        pass
