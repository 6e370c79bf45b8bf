"""core/ is the bottom floor: none of its modules imports the package's upper floors (issue 30).

Read over each module's syntax tree, not by importing it: every ``import``/``from ... import``
(relative ones resolved) and every string constant, so a name handed to importlib in a string
(``"speculators_qwen_compat.fixes:ALL_FIXES"``) counts as the import it is. The floors above
hand core what it needs (the fix catalogue: speculators_qwen_compat/__init__.py).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.pure  # release-independent: run once (tools/matrix.py)

PACKAGE = "speculators_qwen_compat"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE
CORE = ROOT / "core"
#: The package's modules and subpackages besides core: what core must not reach.
ABOVE = sorted(
    p.stem
    for p in ROOT.iterdir()
    if p.stem not in ("core", "__pycache__") and (p.suffix == ".py" or p.is_dir())
)
#: A string naming one of them: dotted or as a path, or the package's root attribute as an
#: entry point names it (``speculators_qwen_compat:install``).
NAMED = re.compile(rf"\b{PACKAGE}(?:[./]({'|'.join(map(re.escape, ABOVE))})\b|:\w)")


def _is_above(module: str) -> bool:
    """Whether an absolute module name is the package (its __init__) or a part of it other
    than core."""
    return module == PACKAGE or (
        module.startswith(PACKAGE + ".") and module.split(".")[1] != "core"
    )


def upward_references(source: str, package: str) -> list[str]:
    """Each import of, and string naming, a part of the package above core in a module's
    ``source`` (``package``: the package its relative imports start from), as ``line: what``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if _is_above(a.name)]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{node.module}" if node.module else anchor
            names = [a.name for a in node.names]
            targets = [f"{base}.{name}" for name in names] if base == PACKAGE else [base]
            if any(map(_is_above, targets)):
                found.append(f"{node.lineno}: from {base} import {', '.join(names)}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += [f"{node.lineno}: {m.group(0)!r} in a string"
                      for m in NAMED.finditer(node.value)]  # fmt: skip
    return found


def _package_of(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1])  # a module's package; a package's __init__: the package


def test_core_imports_nothing_above_it() -> None:
    modules = sorted(CORE.rglob("*.py"))
    assert len(modules) > 5, modules
    found = {
        str(path.relative_to(ROOT.parent)): refs
        for path in modules
        if (refs := upward_references(path.read_text(), _package_of(path)))
    }
    assert not found, f"core/ reaches above itself: {found}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from speculators_qwen_compat.data.render.render_faults import is_refusal", 1),
        ("from ..data.render import render_faults", 1),
        ("from .. import fixes", 1),
        ("import speculators_qwen_compat.fixes", 1),
        ("import speculators_qwen_compat", 1),
        ('CATALOGUE = "speculators_qwen_compat.fixes:ALL_FIXES"', 1),
        ('LOADER = "speculators_qwen_compat:install"', 1),
        ("from speculators_qwen_compat.core import startup", 0),
        ("from . import fix", 0),
        ("from speculators_qwen_compat import core", 0),
        ('PREFIX = "speculators_qwen_compat: "', 0),
        ('"""Imported by ``speculators_qwen_compat.pth``."""', 0),
    ],
)
def test_the_check_sees_each_form(source: str, expected: int) -> None:
    """The walker itself, on one line of a module inside core/."""
    found = upward_references(source + "\n", f"{PACKAGE}.core")
    assert len(found) == expected, found
