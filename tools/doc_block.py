"""A generated block of a document: the text between ``<!-- NAME:start -->`` and
``<!-- NAME:end -->``, the one way every script that measures or derives a figure writes it
(docs/maintainers.md's ``releases``, ``matrix-times``, ``bench`` and ``bench-peer``;
docs/training.md's ``acceptance``; docs/regenerate-responses.md's ``regen-figures``; the same
blocks of bench/RESULTS.md). Nothing else in the file changes."""

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


def read(path: Path, name: str) -> str | None:
    """The body of block ``name`` in the file at ``path``; None when it has none."""
    start, end = markers(name)
    _, found, rest = path.read_text(encoding="utf-8").partition(start)
    return rest.partition(end)[0].strip("\n") if found and end in rest else None


def write(path: Path, name: str, body: str, heading: str | None = None) -> None:
    """Rewrite block ``name`` of the file at ``path``. With ``heading``, a file (or a file
    without the block) gets the block appended under that heading first; without it a missing
    block is an error naming the file."""
    text = path.read_text(encoding="utf-8") if path.is_file() or heading is None else ""
    start, end = markers(name)
    if heading is not None and start not in text:
        text = f"{text.rstrip()}\n\n{heading}\n\n{start}\n{end}\n".lstrip("\n")
    try:
        new = replaced(text, name, body)
    except ValueError as error:
        raise SystemExit(f"{path}: {error}") from None
    path.write_text(new, encoding="utf-8")
