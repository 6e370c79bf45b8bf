"""A release that does not exist: a copy of the installed speculators with its preprocessing
source edited, under another version number (tests/test_unknown_release.py: a renamed function;
tests/test_reordered_release.py: reordered parameters). What a future release could look like,
to check that a fix refuses a shape it does not know instead of misreading it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def make_site(folder: Path, version: str, edit: Callable[[str], str]) -> Path:
    """``folder`` holding ``speculators`` (the installed one, its preprocessing source passed
    through ``edit``) and a dist-info saying ``version``; returns ``folder``."""
    import shutil

    import speculators

    package = folder / "speculators"
    shutil.copytree(Path(speculators.__file__).parent, package)
    preprocessing = package / "data_generation" / "preprocessing.py"
    preprocessing.write_text(edit(preprocessing.read_text()))
    dist_info = folder / f"speculators-{version}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: speculators\nVersion: {version}\n"
    )
    return folder


def first_on_path(site: Path) -> str:
    """PYTHONPATH with the simulated release first; the rest (the release's folder holding
    transformers and datasets, see tools/release_python.sh) stays behind it."""
    rest = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join(p for p in (str(site), rest) if p)
