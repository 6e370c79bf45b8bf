"""prepare_data's ``--output`` written beside itself and put in place only when the run succeeded.

Why: upstream writes into ``--output`` as it goes (token_freq.pt, then the Arrow shards, on
every release; docs/upstream.md "The prepare_data command"), so a run killed part-way, or one
that fails after the map (``--strict-data``, the error limit), leaves a folder that looks like a
dataset, and the next run skips it unless ``--overwrite`` is given. Here upstream writes into
``<parent>/.<name>.incomplete-XXXX`` (a run folder, data/run_folders.py: swept by the next run
once its owner is dead), and ``commit`` renames it to ``--output`` after the report is written.
When ``--output`` already exists (``--overwrite``, or a folder without a dataset) the new files
are moved into it one by one, after the artifacts being replaced are removed.
"""

from __future__ import annotations

import atexit
import os
import shutil
from pathlib import Path

from speculators_qwen_compat.data import run_folders


class StagedOutput:
    """Where upstream writes (``folder``) and where the dataset goes at the end (``final``)."""

    def __init__(self, final: Path, replaced: list[Path] | None = None) -> None:
        self.given = final  # as the user wrote it, for messages
        self.final = Path(os.path.abspath(final))
        #: files in ``final`` this run replaces (an --overwrite run's old artifacts)
        self.replaced = list(replaced or [])
        self.folder = run_folders.make(self.final.parent, staging_prefix(self.final))
        # mkdtemp makes it private (0700); --output gets the mode a plain mkdir would give it
        umask = os.umask(0)
        os.umask(umask)
        self.folder.chmod(0o777 & ~umask)
        self.pid = os.getpid()
        atexit.register(self.abandon)

    def inside(self, path: Path) -> Path:
        """``path`` moved into the staging folder when it lies inside ``final`` (an explicit
        --token-freq-path under --output), else unchanged."""
        absolute = Path(os.path.abspath(path))
        if absolute == self.final or self.final in absolute.parents:
            return self.folder / absolute.relative_to(self.final)
        return path

    def commit(self) -> Path:
        """Put the staged files in place as ``final``; returns the path as the user gave it."""
        if not run_folders.owned(self.folder):
            raise RuntimeError(f"{self.folder} was already committed or abandoned")
        for path in self.replaced:
            path.unlink(missing_ok=True)
        if self.final.is_dir() and not any(self.final.iterdir()):
            self.final.rmdir()
        if not self.final.exists():
            os.rename(self.folder, self.final)
        else:
            for entry in sorted(self.folder.iterdir()):
                target = self.final / entry.name
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target)
                os.replace(entry, target)
            self.folder.rmdir()
        run_folders.release(self.folder, remove=False)
        return self.given

    def abandon(self) -> None:
        """Remove the staged files (the run failed); nothing happens after ``commit``."""
        if os.getpid() == self.pid and run_folders.owned(self.folder):  # not in forked workers
            run_folders.release(self.folder)


def staging_prefix(final: Path) -> str:
    return f".{final.name}.incomplete-"
