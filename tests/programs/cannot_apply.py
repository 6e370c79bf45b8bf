"""Four fixes that cannot apply, on a registry of their own (test_activation.py).

``raises`` fits stand_in_target but raises half-way through applying; looking up ``bad_shape``'s
target raises; ``no_class`` names a class that cannot be imported; ``nothing`` wraps, then finds
nothing to patch. Prints what ``stand_in_target.f()`` returns and the fixes' states, then what
``f()`` returns after the registry's uninstall: the import never breaks, a half-applied fix is
taken back."""

from __future__ import annotations

import sys
from typing import Any

from speculators_qwen_compat.core.fix import Fix, FixEntry, NothingToPatch, Patcher
from speculators_qwen_compat.core.registry import _Registry
from speculators_qwen_compat.core.targets import Resolved, Shape, Target

TARGET = "stand_in_target"  # beside this program, on sys.path when it runs by path


class Raises(Fix):
    name, modules = "raises", (TARGET,)
    shapes = (Shape("fits", (Target(TARGET, "f"),)),)

    def apply(self, found: Resolved, patcher: Patcher) -> None:
        owner, name = found.owner_and_name(self.shapes[0].targets[0])
        patcher.wrap(owner, name, lambda wrapped, instance, args, kwargs: "patched")
        raise RuntimeError("boom")


class Nothing(Raises):  # half-way, then nothing of the release is its to patch
    name = "nothing"

    def apply(self, found: Resolved, patcher: Patcher) -> None:
        owner, name = found.owner_and_name(self.shapes[0].targets[0])
        patcher.wrap(owner, name, lambda wrapped, instance, args, kwargs: "patched")
        raise NothingToPatch("not on this release's route")


class BadShape(Fix):  # looking its target up raises
    name, modules = "bad_shape", (TARGET,)
    shapes = (Shape("never", (Target(TARGET, "missing"),)),)


def main(argv: list[str]) -> int:
    registry = _Registry(
        [
            FixEntry("raises", (TARGET,), "__main__:Raises"),
            FixEntry("bad_shape", (TARGET,), "__main__:BadShape"),
            FixEntry("no_class", (TARGET,), "stand_in_missing_module:NoClass"),
            FixEntry("nothing", (TARGET,), "__main__:Nothing"),
        ]
    )
    registry.install(())
    target: Any = __import__(TARGET)
    states = registry.states
    names = ("raises", "bad_shape", "no_class", "nothing")
    print(target.f(), *(states[name].state for name in names))
    registry.uninstall()
    print(target.f())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
