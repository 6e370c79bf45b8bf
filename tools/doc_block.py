"""A generated block of a document: the text between ``<!-- NAME:start -->`` and
``<!-- NAME:end -->``, written by the script that measured or derived it (README.md's
``releases``, docs/maintainers.md's ``matrix-times``). Nothing else in the file changes."""

from __future__ import annotations

from pathlib import Path


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def replaced(text: str, name: str, body: str) -> str:
    """``text`` with block ``name`` holding ``body``; ValueError when it has no such block."""
    start, end = markers(name)
    head, found, rest = text.partition(start)
    _, closed, tail = rest.partition(end)
    if not found or not closed:
        raise ValueError(f"no {start} ... {end} block")
    return f"{head}{start}\n{body}\n{end}{tail}"


def write(path: Path, name: str, body: str) -> None:
    """Rewrite block ``name`` of the file at ``path``."""
    text = path.read_text(encoding="utf-8")
    path.write_text(replaced(text, name, body), encoding="utf-8")
