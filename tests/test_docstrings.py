"""The package's docstrings stay short and cite no upstream line numbers (issue 46).

A module docstring says what the module does and why in a few lines; release facts, with
upstream's files and lines, live in docs/upstream.md, which module docstrings cite by section
name: a line number in a docstring goes stale with the next release and nothing checks it.
The source files are parsed (ast), not imported, so this needs no release.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.pure  # release-independent: run once (tools/matrix.py)

PACKAGE = Path(__file__).resolve().parents[1] / "speculators_qwen_compat"
MODULE_DOCSTRING_MAX_LINES = 5

# The forms an upstream line citation took: a release then a line ("0.8.1 :56", "0.9.0:55"),
# a file then a line ("preprocessing.py:110", "cli/prepare_data.py:55"), a bare line after a
# space, a bracket or a backtick ("(:399", " :411-130", "``:673``") and "line 42".
LINE_CITATIONS = (
    re.compile(r"(?<![\w.])\d+\.\d+(?:\.\d+)* ?:\d+"),
    re.compile(r"\.py:\d+"),
    re.compile(r"(?:^|(?<=[\s(`\[/]))[:]\d+"),
    re.compile(r"\blines? \d+", re.IGNORECASE),
)

Documented = ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def source_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def docstrings(tree: ast.Module) -> Iterator[tuple[str, str]]:
    """(what, docstring) of the module and of every function and class in it."""
    for node in ast.walk(tree):
        if isinstance(node, Documented):
            text = ast.get_docstring(node, clean=False)
            if text is not None:
                where = "module" if isinstance(node, ast.Module) else f"{node.name}:{node.lineno}"
                yield where, text


def line_citations(text: str) -> list[str]:
    return [match.group(0) for pattern in LINE_CITATIONS for match in pattern.finditer(text)]


def test_the_package_has_source_files() -> None:
    assert len(source_files()) > 50


@pytest.mark.parametrize(
    ("text", "cited"),
    [
        ("0.8.1 :56, 0.9.0 :55", True),
        ("(0.5.0 :399, 0.6.0.2:592)", True),
        ("``cli/regenerate_responses.py`` :665", True),
        ("preprocessing.py:110", True),
        ("(:286, upstream's retries)", True),
        ("``:411``", True),
        ("see line 42", True),
        ('docs/upstream.md, "Conversation column and normalization"', False),
        ("speculators 0.8.1/0.9.0, transformers 5.16", False),
        ("``{conv}_gen{k}`` ids, 14 s, 2,000 rows, x*(1+w)", False),
        ("``hf:NAME:SPLIT``, ``local:<model path>``", False),
    ],
)
def test_the_citation_pattern(text: str, cited: bool) -> None:
    assert bool(line_citations(text)) is cited


def test_module_docstrings_are_short() -> None:
    long = {}
    for path in source_files():
        text = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
        lines = len(text.strip().splitlines()) if text else 0
        if lines > MODULE_DOCSTRING_MAX_LINES:
            long[str(path.relative_to(PACKAGE.parent))] = lines
    assert not long, f"module docstrings over {MODULE_DOCSTRING_MAX_LINES} lines: {long}"


def test_no_docstring_cites_an_upstream_line() -> None:
    cited = []
    for path in source_files():
        for what, text in docstrings(ast.parse(path.read_text(encoding="utf-8"))):
            found = line_citations(text)
            if found:
                cited.append(f"{path.relative_to(PACKAGE.parent)} {what}: {', '.join(found)}")
    assert not cited, "upstream line numbers (cite docs/upstream.md instead):\n" + "\n".join(cited)
