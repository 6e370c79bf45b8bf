"""Every error or warning line the docs quote is one the code can print.

The pages (README.md, docs/*.md) quote what a run says when it fails or warns, in backticks:
our one-line errors (``speculators_qwen_compat: error: ...``), the messages of the fault table,
skip reasons, upstream's exception lines. A quoted message that no code holds is a promise the
user cannot grep for. Each quoted message is cut into its literal pieces (at the placeholders the
prose uses: ``...``, ``<cause>``, upper-case names such as ``URL`` or ``N``, and at the ``; ``
where our code joins a line's clauses); every piece must occur in a string literal of our code
(speculators_qwen_compat/, tools/, bench/: f-strings with their fields as cuts, implicit
concatenation joined) or of the installed speculators release, or in a chat template the package
ships. The oracle is the source text, not the docs. Generated blocks (what a script recorded from
a run) and docs/maintainers.md's hand-typed dated log are not quoted promises and are left out;
messages of other programs (vLLM, SpecForge) are exempt by name below.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.pure  # the docs against our code and the newest installed release

ROOT = Path(__file__).resolve().parents[1]
OURS = ("speculators_qwen_compat", "tools", "bench")
BLOCK = re.compile(r"<!-- ([\w-]+):start -->.*?<!-- \1:end -->", re.DOTALL)
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")
LOG = "## Dated log of `make test` runs"
#: A span that reads as a message line: ours, or an exception line.
MESSAGE = re.compile(
    r"^(?:speculators_qwen_compat: |[\w.]*(?:Error|Exception): |render server |image parts |"
    r"the temporary folder |wrote |skipped |regenerated |tool call |nothing to supervise|"
    r"fewer supervised|matrix: |[A-Z] failed with an error|Failed to process )"
)
#: Where the prose puts a placeholder: ``...``, ``<what>``, ``(...)``, an upper-case name (a
#: file named after one: ``NAME.partial.jsonl``), 'X'.
PLACEHOLDER = re.compile(
    r"\.\.\.|<[^<>]+>|\(\.\.\.\)|\b[A-Z][A-Z_:]*(?:\.[a-z][\w.]*)?\b(?![a-z])|'X'"
)
#: Quoted messages no code of ours or upstream's holds, with whose words they are.
EXEMPT: dict[str, str] = {
    "NotImplementedError: Speculative Decoding with draft models or parallel drafting does not "
    "support M-RoPE yet": "vLLM 0.32's (v1/spec_decode/llm_base_proposer.py _raise_if_mrope)",
    "OSError: AF_UNIX path too long": "Python's socket module (binding a Unix socket path over "
    "107 bytes)",
    "OSError: Can't load image processor": "transformers' (image_processing_base.py)",
    "ImportError: ... requires the Torchvision library": "transformers' (utils/import_utils.py)",
    "ValueError: Could not load any image processor class": "transformers' "
    "(models/auto/image_processing_auto.py)",
}


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def quoted_messages(text: str) -> list[str]:
    """The backticked message lines of a page's prose (blocks, fences and the dated log out)."""
    text = text.partition(LOG)[0]
    text = FENCE.sub("", BLOCK.sub("", text))
    spans = (" ".join(m.group(1).split()) for m in SPAN.finditer(text))
    return [s for s in spans if MESSAGE.match(s) and len(s.split()) >= 3]


#: The head every one-line message of ours gets from the one function that prints it
#: (cli/support.py, core/startup.py ``say``), not from the message's own text.
HEAD = re.compile(r"^speculators_qwen_compat: (?:error: |warning: )?")


def pieces(message: str) -> list[str]:
    """The literal pieces of a quoted message that the code must hold."""
    out = []
    for part in PLACEHOLDER.split(HEAD.sub("", message)):
        for piece in part.split("; "):
            piece = piece.strip(" ;,.:()\"'")
            if len(piece) >= 4 and re.search(r"[a-z]{3}", piece):
                out.append(piece)
    return out


def _literals(source: str) -> list[str]:
    """The string literals of a Python source (an f-string's fields cut it)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            for value in node.values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    found.append(value.value)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append(node.value)
    return found


def _upstream_root() -> Path | None:
    spec = importlib.util.find_spec("speculators")
    return Path(next(iter(spec.submodule_search_locations))) if spec else None


@cache
def corpus() -> str:
    """Every string our code and the installed speculators hold, whitespace collapsed, one per
    line; plus the chat templates the package ships (the Qwen3.5/3.6 templates' own errors)."""
    roots = [ROOT / name for name in OURS]
    upstream = _upstream_root()
    roots += [upstream] if upstream else []
    texts: list[str] = []
    for root in roots:
        for path in root.rglob("*.py"):
            texts += _literals(path.read_text(encoding="utf-8", errors="replace"))
    for path in (ROOT / "speculators_qwen_compat").rglob("*.jinja"):
        texts.append(path.read_text(encoding="utf-8"))
    return "\n".join(" ".join(t.split()) for t in texts)


def unprintable(message: str) -> list[str]:
    """The pieces of ``message`` no code holds."""
    held = corpus()
    return [piece for piece in pieces(message) if piece not in held]


def test_the_upstream_release_is_searched() -> None:
    assert _upstream_root() is not None, "run in a release venv (tools/release_python.sh)"


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_quoted_message_is_one_the_code_prints(page: Path) -> None:
    found = {
        message: missing
        for message in quoted_messages(page.read_text(encoding="utf-8"))
        if message not in EXEMPT and (missing := unprintable(message))
    }
    assert not found, f"{page.name}: quoted messages no code holds (message: pieces): {found}"


def test_the_pages_quote_messages_at_all() -> None:
    """The check has something to check: the fault table's lines and our error line."""
    quoted = [m for page in pages() for m in quoted_messages(page.read_text(encoding="utf-8"))]
    assert len(quoted) >= 8, quoted
    assert any(m.startswith("speculators_qwen_compat: ") for m in quoted), quoted


@pytest.mark.parametrize(
    ("message", "missing"),
    [
        # our words, placeholders and a clause join in between
        ("render server URL failed: <cause> (...); N conversations were done", []),
        # a message the code never printed
        ("speculators_qwen_compat: error: the moon is green", ["the moon is green"]),
        ("speculators_qwen_compat: warning: fixes not active: ...", []),
        # the same words with a changed clause
        (
            "image parts need Pillow to render locally: install it",
            ["image parts need Pillow to render locally: install it"],
        ),
    ],
)
def test_what_is_checked(message: str, missing: list[str]) -> None:
    assert unprintable(message) == missing


def test_every_exemption_is_still_quoted() -> None:
    quoted = {m for page in pages() for m in quoted_messages(page.read_text(encoding="utf-8"))}
    assert set(EXEMPT) <= quoted, sorted(set(EXEMPT) - quoted)
