"""The record a save with the fixes on leaves beside a drafter: its norm while it trained, the fixes
that acted. Why: nothing upstream saves says whether targets were mis-scaled. A file of its own
(speculators and vLLM never read it), bound to the model.safetensors saved with it (a later save
without a record leaves it stale); written by the trained_record fix, read by doctor.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

RECORD_FILE = "speculators_qwen_compat.json"
FORMAT = 1
#: The weights file a record is bound to (not config.json: repair-drafter rewrites it).
WEIGHTS_FILE = "model.safetensors"

#: ``weights`` kinds: how the saved weights came to be in the process that saved them.
BUILT = "built"  # a fresh drafter (from_training_args, or a config-only --from-pretrained)
LOADED = "loaded"  # SpeculatorModel.from_pretrained loaded weights (a folder or a Hub id)
RESUMED = "resumed"  # the trainer resumed a run: its checkpointer loaded the weights
#: ``verifier_norm`` when the drafter holds one whose convention could not be read (None: it
#: holds none).
UNREADABLE = "unreadable"


def weights_binding(folder: Path) -> dict[str, Any] | None:
    """Size and sha256 of ``folder``'s model.safetensors, None when there is none."""
    path = folder / WEIGHTS_FILE
    if not path.is_file():
        return None
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return {"file": WEIGHTS_FILE, "size": path.stat().st_size, "sha256": digest.hexdigest()}


def write(folder: Path, record: dict[str, Any]) -> None:
    """Writes ``record`` into ``folder`` (beside config.json), bound to the weights there,
    replacing an older record; a failed write leaves no record at all."""
    path = folder / RECORD_FILE
    tmp = path.with_name(path.name + ".tmp")
    try:
        bound = {"format": FORMAT, **record, "weights_file": weights_binding(folder)}
        tmp.write_text(json.dumps(bound, indent=2, sort_keys=True) + "\n")
        tmp.replace(path)
    except BaseException:
        remove(folder)
        raise


def remove(folder: Path) -> None:
    """Removes ``folder``'s record (and a half-written one): no stale record outlives a save."""
    for name in (RECORD_FILE, RECORD_FILE + ".tmp"):
        (folder / name).unlink(missing_ok=True)


def read(folder: Path) -> dict[str, Any] | None:
    """The record in ``folder``, None when there is none, it cannot be read or its weights are
    not the folder's (ignored_because says why; a verdict then falls back to the release table)."""
    return _read(folder)[0]


def ignored_because(folder: Path) -> str | None:
    """Why ``folder``'s record file is ignored, None when it is read or there is none."""
    return _read(folder)[1]


def _read(folder: Path) -> tuple[dict[str, Any] | None, str | None]:
    path = folder / RECORD_FILE
    try:
        value = json.loads(path.read_text())
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as exc:
        return None, f"{path} is unreadable ({exc})"
    if not isinstance(value, dict) or value.get("format") != FORMAT:
        return None, f"{path} is not a record of format {FORMAT}"
    if "weights_file" not in value:
        return None, f"{path} names no weights file: it cannot say it belongs to these weights"
    try:
        here = weights_binding(folder)
    except OSError as exc:
        return None, f"{folder / WEIGHTS_FILE} is unreadable ({exc})"
    if value["weights_file"] != here:
        return None, (
            f"{path} was written with other weights than the {WEIGHTS_FILE} now beside it (a "
            "later save wrote no record): it no longer describes them"
        )
    return value, None
