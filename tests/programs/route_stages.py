"""The routes as applied (test_route.py): imports upstream's modules with the fixes on (the venv's
.pth) and prints, per function the installed generation's route or the training stages name, the
stages set on its one wrapper and how many of our wrappers lie between it and upstream's
function, as JSON."""

from __future__ import annotations

import contextlib
import importlib
import json
import sys
from typing import Any

MODULES = (
    "speculators.data_generation.preprocessing",
    "speculators.cli.prepare_data",
    "speculators.model",
    "speculators.train.trainer",
)


def _resolve(module: str, path: str) -> Any:
    owner: Any = sys.modules[module]
    for part in path.split("."):
        owner = getattr(owner, part, None)
        if owner is None:
            return None
    return owner


def main() -> int:
    import speculators_qwen_compat
    from speculators_qwen_compat.core.fix import Route
    from speculators_qwen_compat.core.registry import registry
    from speculators_qwen_compat.fixes.training.stages import ORDER
    from speculators_qwen_compat.route.declaration import generation

    for name in MODULES:
        with contextlib.suppress(ImportError):  # a release without the module
            importlib.import_module(name)
    speculators_qwen_compat.status()
    homes = {
        target.path: target.module
        for entry in registry().fixes
        for shape in entry.load().shapes
        for target in shape.targets
    }
    found: dict[str, Any] = {}
    wrapped = {c.path: c.module for _, c in generation().ROUTE.walk() if c.order}
    for path in [*wrapped, *ORDER]:
        home = wrapped.get(path) or homes.get(path)
        if home is None or home not in sys.modules:
            continue
        value = _resolve(home, path)
        if value is None:
            continue
        route = getattr(value, "_self_wrapper", None)
        inner = getattr(value, "__wrapped__", None)
        ours_inside = 0
        while inner is not None and hasattr(inner, "_self_wrapper"):
            ours_inside += 1
            inner = getattr(inner, "__wrapped__", None)
        found[path] = {
            "route": isinstance(route, Route),
            "stages": [n for n in route.order if getattr(route.stages, n)]
            if isinstance(route, Route)
            else [],
            "wrappers_inside": ours_inside,
        }
    states = {s.name: str(s.state) for s in speculators_qwen_compat.status()}
    print(json.dumps({"routes": found, "states": states}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
