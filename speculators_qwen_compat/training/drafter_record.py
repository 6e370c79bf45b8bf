"""The record a save with the fixes on leaves beside a drafter: its norm while it trained, the fixes
that acted. Why: nothing upstream saves says whether targets were mis-scaled. A file of its own
(speculators and vLLM never read it); written by the trained_record fix, read by doctor. Re-saving
never upgrades it: a drafter loaded and saved without training keeps its source's verdict.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RECORD_FILE = "speculators_qwen_compat.json"
FORMAT = 1

#: ``weights`` kinds: how the saved weights came to be in the process that saved them.
BUILT = "built"  # a fresh drafter (from_training_args, or a config-only --from-pretrained)
LOADED = "loaded"  # SpeculatorModel.from_pretrained of a folder with trained weights


def write(folder: Path, record: dict[str, Any]) -> None:
    """Writes ``record`` into ``folder`` (beside config.json), replacing an older record."""
    path = folder / RECORD_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"format": FORMAT, **record}, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def read(folder: Path) -> dict[str, Any] | None:
    """The record in ``folder``, None when there is none or it cannot be read (a verdict then
    falls back to the release table, as for a folder plain speculators saved)."""
    try:
        value = json.loads((folder / RECORD_FILE).read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) and value.get("format") == FORMAT else None
