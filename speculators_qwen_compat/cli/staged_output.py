"""prepare_data's ``--output`` written beside itself, put in place only when the run succeeded.

Why: upstream writes into ``--output`` as it goes, so a killed or refused run leaves what looks
like a dataset. Upstream writes into a registered run folder beside it (data/read/run_folders.py),
renamed after the report; ``--overwrite`` as upstream rules (docs/upstream.md, "Overwrite guard").
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import logging
import os
import shutil
from pathlib import Path

from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.data.account.ledger import REPORT_NAME
from speculators_qwen_compat.data.read import run_folders

log = logging.getLogger("speculators_qwen_compat")
#: the files of prepare_data's output besides ``*.arrow`` shards
ARTIFACTS = frozenset({"dataset_info.json", "state.json", "token_freq.pt", REPORT_NAME})


class StagedOutput:
    """Where upstream writes (``folder``) and where the dataset goes at the end (``final``)."""

    def __init__(self, final: Path, replaced: list[Path] | None = None) -> None:
        self.given = final  # as the user wrote it, for messages
        self.final = Path(os.path.abspath(final))
        #: files in ``final`` this run replaces (an --overwrite run's old artifacts)
        self.replaced = [Path(os.path.abspath(p)) for p in replaced or []]
        self.folder = run_folders.make(
            self.final.parent, staging_prefix(self.final), registered=True
        )
        # made first, then looked for: of two runs starting at once, neither misses the other
        others = run_folders.live(self.final.parent, staging_prefix(self.final))
        if others:
            run_folders.release(self.folder)
            raise CompatError(
                f"another prepare_data run is writing --output {final} (its folder "
                f"{others[0].name} is in use); wait for it to end or give another --output"
            )
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
        if not self.replaced and any(self.final.glob("*.arrow")):
            raise CompatError(
                f"a dataset appeared in --output {self.given} while this run wrote its own; "
                "it is kept: rerun with --overwrite to replace it, or give another --output"
            )
        if self.final.is_dir() and not any(self.final.iterdir()):
            self.final.rmdir()
        if not self.final.exists():
            os.rename(self.folder, self.final)
        elif (
            self.replaced
            and set(self.final.iterdir()) == set(self.replaced)
            and exchange(self.folder, self.final)
        ):
            # one step: --output holds the old dataset or the new one, never neither; the old
            # files, now in the staging folder, go with it
            run_folders.release(self.folder)
            return self.given
        else:  # other files in --output, or a file system that cannot swap: new files first
            moved = set()
            for entry in sorted(self.folder.iterdir()):
                target = self.final / entry.name
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target)
                os.replace(entry, target)
                moved.add(target)
            for path in self.replaced:
                if path not in moved:
                    path.unlink(missing_ok=True)
            self.folder.rmdir()
        run_folders.release(self.folder, remove=False)
        return self.given

    def abandon(self) -> None:
        """Remove the staged files (the run failed); nothing happens after ``commit``."""
        if os.getpid() == self.pid and run_folders.owned(self.folder):  # not in forked workers
            run_folders.release(self.folder)


def exchange(first: Path, second: Path) -> bool:
    """Swap two paths in one step (Linux ``renameat2`` with ``RENAME_EXCHANGE``); False where
    the system or the file system has no such call."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]  # fmt: skip
    at_cwd, rename_exchange = -100, 2
    if renameat2(at_cwd, os.fsencode(first), at_cwd, os.fsencode(second), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(second))


def stage(output: Path, overwrite: bool, token_freq_path: Path | None) -> StagedOutput | None:
    """Upstream's checks on the real ``--output`` (0.8.1/0.9.0 ``cli/prepare_data.py``: an
    existing dataset is kept without ``--overwrite``; ``--overwrite`` refuses a folder holding
    other files: ``artifacts``), then a staging folder beside it; None when upstream is to see
    the real folder (it holds a dataset and the run skips). Either way the dead runs' staged
    folders are swept first."""
    replaced: list[Path] = []
    if output.exists():
        if not overwrite and any(output.glob("*.arrow")):
            run_folders.sweep_registered()
            return None
        if overwrite:  # removed only when the new dataset is in place (StagedOutput.commit)
            replaced = artifacts(output, token_freq_path or output / "token_freq.pt")
    return StagedOutput(output, replaced)


def staging_prefix(final: Path) -> str:
    return f".{final.name}.incomplete-"


def artifacts(output: Path, token_freq_path: Path) -> list[Path]:
    """prepare_data's own files in ``output`` (an --overwrite run replaces them); a CompatError
    when anything else is there."""
    resolved_freq = token_freq_path.resolve()
    found, others = [], []
    for path in output.iterdir():
        is_artifact = path.is_file() and (
            path.suffix == ".arrow" or path.name in ARTIFACTS or path.resolve() == resolved_freq
        )
        (found if is_artifact else others).append(path)
    if others:
        names = ", ".join(sorted(p.name for p in others))
        raise CompatError(
            f"--overwrite would delete files that are not prepare_data output in {output} "
            f"({names}); move them away or choose another --output"
        )
    if found:
        log.warning("Replacing %d prepare_data artifacts in %s", len(found), output)
    return found
