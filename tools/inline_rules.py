"""One self-contained Python module built from chosen definitions of the package's own modules.

Target: the source patches (patches/<release>/, made by tools/make_patches.py). A patch to
upstream cannot import this package, yet its normaliser and its local rendering must be the
package's, not a copy kept by hand that drifts. This takes the names a patch needs (say
``normalize_conversation`` of ``speculators_qwen_compat.data.normalize.normalize``), follows every
module-level name they use, in their module or through ``from speculators_qwen_compat... import
name``, and lays the statements that define them out in one module, each exactly as the
package's source has it (comments above a definition included), with the standard-library and
third-party imports they use. A definition that needs a whole module of the package, or imports
the package inside a function body, stops the build: the generated module must stand alone.
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "speculators_qwen_compat"


class InlineError(RuntimeError):
    """The chosen definitions cannot be laid out as one module on their own."""


@dataclass
class _Source:
    name: str  # dotted module name
    path: Path
    lines: list[str]
    #: top-level name -> index of the statement defining it
    defines: dict[str, int] = field(default_factory=dict)
    statements: list[ast.stmt] = field(default_factory=list)
    #: name bound by a top-level import -> (module, imported name or None for ``import x``)
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)


def _load(module: str) -> _Source:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise InlineError(f"{module} is not importable")
    path = Path(spec.origin)
    text = path.read_text("utf-8")
    source = _Source(module, path, text.splitlines())
    tree = ast.parse(text)
    for index, stmt in enumerate(tree.body):
        source.statements.append(stmt)
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                source.imports[alias.asname or alias.name.split(".")[0]] = (alias.name, None)
        elif isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                source.imports[alias.asname or alias.name] = (stmt.module or "", alias.name)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            source.defines[stmt.name] = index
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                names = target.elts if isinstance(target, ast.Tuple) else [target]
                for name in names:
                    if isinstance(name, ast.Name):
                        source.defines[name.id] = index
    return source


def _is_submodule(package: str, name: str) -> bool:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return False
    return importlib.util.find_spec(f"{package}.{name}") is not None


def _names_used(stmt: ast.stmt) -> set[str]:
    return {node.id for node in ast.walk(stmt) if isinstance(node, ast.Name)}


def _check_self_contained(source: _Source, stmt: ast.stmt) -> None:
    for node in ast.walk(stmt):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
            raise InlineError(
                f"{source.name}:{node.lineno} imports {node.module} inside a definition"
            )


def _text(source: _Source, stmt: ast.stmt) -> str:
    """The statement as the source has it, with the comment lines right above it."""
    decorators = getattr(stmt, "decorator_list", [])
    first = min([stmt.lineno, *(d.lineno for d in decorators)]) - 1
    while first > 0 and source.lines[first - 1].lstrip().startswith("#"):
        first -= 1
    assert stmt.end_lineno is not None
    return "\n".join(source.lines[first : stmt.end_lineno])


@dataclass
class Inlined:
    """What ``inline`` chose: statements per source module, and the imports they need."""

    sections: list[tuple[str, str]]  # (source file, its chosen statements)
    imports: list[str]


def inline(roots: list[tuple[str, list[str]]]) -> Inlined:
    """The statements defining ``roots`` (module, names) and everything they use, in the order
    of the modules given (a module needed but not listed goes first) and of their source."""
    sources: dict[str, _Source] = {}
    chosen: dict[str, set[int]] = {}
    external: dict[str, set[str | None]] = {}
    where: dict[str, str] = {}  # top-level name -> module defining it (collision check)

    def source_of(module: str) -> _Source:
        if module not in sources:
            sources[module] = _load(module)
            chosen[module] = set()
        return sources[module]

    def need(module: str, name: str) -> None:
        source = source_of(module)
        if name in source.imports:
            origin, imported = source.imports[name]
            if origin.startswith(PACKAGE):
                if imported is None or _is_submodule(origin, imported):
                    raise InlineError(f"{module} uses the module {origin}.{imported} as a whole")
                need(origin, imported)
            else:
                external.setdefault(origin, set()).add(imported if imported else None)
            return
        index = source.defines.get(name)
        if index is None or index in chosen[module]:
            return  # a builtin, a local name, or chosen already
        if where.setdefault(name, module) != module:
            raise InlineError(f"{name} is defined in both {where[name]} and {module}")
        chosen[module].add(index)
        stmt = source.statements[index]
        _check_self_contained(source, stmt)
        for used in sorted(_names_used(stmt)):
            need(module, used)

    for module, names in roots:
        for name in names:
            if name not in source_of(module).defines:
                raise InlineError(f"{module} defines no {name}")
            need(module, name)

    order = [m for m in sources if m not in dict(roots)] + [m for m, _ in roots]
    sections = []
    for module in dict.fromkeys(order):
        source = sources[module]
        if chosen[module]:
            relative = source.path.relative_to(source.path.parents[module.count(".")])
            statements = [source.statements[i] for i in sorted(chosen[module])]
            sections.append((relative.as_posix(), _join(source, statements)))
    return Inlined(sections, _import_lines(external))


def _join(source: _Source, statements: list[ast.stmt]) -> str:
    """Definitions two blank lines apart, consecutive simple assignments one line apart."""
    out = ""
    for previous, stmt in zip([None, *statements], statements, strict=False):
        if previous is not None:
            simple = not isinstance(previous, _DEFINITIONS) and not isinstance(stmt, _DEFINITIONS)
            out += "\n" if simple else "\n\n\n"
        out += _text(source, stmt)
    return out


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _import_lines(external: dict[str, set[str | None]]) -> list[str]:
    plain = sorted(f"import {m}" for m, names in external.items() if None in names)
    named = sorted(
        f"from {m} import {', '.join(sorted(n for n in names if n))}"
        for m, names in external.items()
        if any(names)
    )
    return plain + named


def render_module(docstring: str, inlined: Inlined) -> str:
    """The generated module's text."""
    parts = [f'"""{docstring}"""', "from __future__ import annotations", "\n".join(inlined.imports)]
    body = []
    for path, text in inlined.sections:
        body.append(f"# --- {path} ---\n\n\n{text}")
    return "\n\n".join(parts) + "\n\n\n" + "\n\n\n".join(body) + "\n"
