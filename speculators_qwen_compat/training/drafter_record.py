"""The record a save with the fixes on leaves beside a drafter: what the norm was while its
weights trained, and which fixes acted on the folder.

Why: nothing upstream saves says whether the targets were mis-scaled (no ``verifier_norm``
tensor; ``train_command.txt`` reads the same with or without the package). A file of its own,
which speculators and vLLM never read, so the folder loads as before. Written by the
trained_record fix, read by ``doctor --drafter`` (training/norm_verdict.py) and copied as it is
by ``repair-drafter``. Re-saving never upgrades what the weights trained with: a drafter loaded
and saved without a training run in between keeps its source's verdict.
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
