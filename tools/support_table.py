"""Write the one release table (tested releases x fixes, each fix's expected state) from
speculators_qwen_compat/core/releases.py, the table that also drives ``status`` and the matrix.

``python tools/support_table.py`` rewrites block ``releases`` of docs/maintainers.md through
tools/doc_block.py; ``--check`` exits 1 when the page is out of date (a test runs it).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import doc_block  # noqa: E402

from speculators_qwen_compat.core.releases import (  # noqa: E402
    TESTED_RELEASES,
    UNTESTABLE_RELEASES,
)

DOC = ROOT / "docs" / "maintainers.md"


def render() -> str:
    fixes = list(next(iter(TESTED_RELEASES.values())).fixes)
    lines = [
        "| release | what its preprocessing looks like | " + " | ".join(fixes) + " |",
        "|---|---|" + "---|" * len(fixes),
    ]
    for release in TESTED_RELEASES.values():
        cells = " | ".join(release.fixes[fix] for fix in fixes)
        lines.append(f"| {release.version} (tested) | {release.shape} | {cells} |")
    for version, reason in UNTESTABLE_RELEASES.items():
        lines.append(f"| {version} | not testable here: {reason} |" + " |" * len(fixes))
    return "\n".join(lines)


def updated(text: str) -> str:
    return doc_block.replaced(text, "releases", render())


def main(argv: list[str]) -> int:
    if "--check" in argv:
        if updated(DOC.read_text(encoding="utf-8")) != DOC.read_text(encoding="utf-8"):
            print(f"{DOC.relative_to(ROOT)}: the release table is out of date: make support-table")
            return 1
        return 0
    doc_block.write(DOC, "releases", render())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
