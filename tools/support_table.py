"""Write the README's support table from speculators_qwen_compat/releases.py.

``python tools/support_table.py`` rewrites the block between ``<!-- releases:start -->`` and
``<!-- releases:end -->``; ``--check`` exits 1 when the README is out of date (a test runs it).
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

README = ROOT / "README.md"


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
    text = README.read_text(encoding="utf-8")
    new = updated(text)
    if "--check" in argv:
        if new != text:
            print("README.md support table is out of date: run make support-table")
            return 1
        return 0
    README.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
