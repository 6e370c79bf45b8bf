"""What the venv-wide ``.pth`` does at start-up: read the switch, defer the install to speculators.

Why: the ``.pth`` runs in every interpreter of the venv; registering the hooks there would cost
more than a bare start-up. A finder that finds nothing waits for ``speculators`` and installs the
fixes then, before any of it loads; only ``os`` and ``sys`` are imported here.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from speculators_qwen_compat.core.fix import FixEntry

#: Environment switch: unset, ``on`` or ``1``: every fix on; ``off`` or ``0``: the .pth stays
#: idle; ``off:NAME,NAME``: those fixes off, the others on. Anything else is reported in one
#: stderr line and the fixes stay on.
ENV_SWITCH = "SPECULATORS_QWEN_COMPAT"
SWITCH_SYNTAX = "on, off, 1, 0 or off:FIX,FIX"
#: The package holding every module a fix targets.
TRIGGER = "speculators"
PREFIX = "speculators_qwen_compat: "

#: Names of the fixes to leave off, while an install waits; None when none waits.
_waiting: set[str] | None = None
#: Why the deferred install failed (say, wrapt is missing); None when it did not fail.
activation_error: str | None = None
_said: set[str] = set()
#: Returns the fixes (``FixEntry``) in the order they apply; handed down by the package's
#: ``__init__``.
_catalogue: Callable[[], Sequence[FixEntry]] | None = None


def hand_catalogue(load: Callable[[], Sequence[FixEntry]]) -> None:
    """Name where the fixes come from: ``load()`` returns them (names, target modules and
    "module:Class", no class imported), in the order they apply. Called by the package's
    ``__init__``; the registry calls ``load`` once, when first used."""
    global _catalogue
    _catalogue = load


def catalogue() -> Sequence[FixEntry]:
    """The fixes handed down by ``hand_catalogue``."""
    if _catalogue is None:  # only if core were imported outside its package
        raise RuntimeError("no fix catalogue: hand_catalogue() was never called")
    return _catalogue()


def say(message: str) -> None:
    """One line on stderr, once per process (the .pth runs before any logging is set up)."""
    if message not in _said:
        _said.add(message)
        sys.stderr.write(f"{PREFIX}{message}\n")


def parse_switch(value: str) -> tuple[bool, set[str]]:
    """(whole package off, names of fixes off) for a switch value; ValueError if malformed."""
    text = value.strip()
    lowered = text.lower()
    if lowered in ("", "on", "1"):
        return False, set()
    if lowered in ("off", "0"):
        return True, set()
    if lowered.startswith("off:"):
        names = [part.strip() for part in text[4:].split(",")]
        if names and all(names):
            return False, set(names)
    raise ValueError(f"{ENV_SWITCH}={value!r} is not {SWITCH_SYNTAX}; every fix stays on")


def switched_off_by_env(environ: dict[str, str] | None = None) -> tuple[bool, set[str]]:
    """Read ENV_SWITCH: (whole package off for the .pth, names of fixes switched off). A
    malformed value is said once on stderr and leaves everything on."""
    value = (environ if environ is not None else os.environ).get(ENV_SWITCH, "")
    try:
        return parse_switch(value)
    except ValueError as exc:
        say(f"warning: {exc}")
        return False, set()


def switch_value(disabled: set[str]) -> str:
    """The switch value that leaves ``disabled`` off (for child interpreters)."""
    return f"off:{','.join(sorted(disabled))}" if disabled else "on"


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
    global activation_error
    try:
        from speculators_qwen_compat.core.registry import registry

        registry().install(disabled)
    except Exception as exc:  # a broken shim must never break the import that triggered it
        activation_error = " ".join(str(exc).split()) or type(exc).__name__
        say(f"warning: fixes not active: {activation_error}")
