"""Children a test can Ctrl-C however the suite itself was started.

A process that ignores SIGINT (a non-interactive shell's ``cmd &``) hands SIG_IGN to its children
across exec; Python then installs no KeyboardInterrupt handler and asyncio.run none of its own, so
a SIGINT sent to the child is dropped. A terminal's Ctrl-C reaches a job whose SIGINT is default.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

#: SIGINT back to its default, then the command itself in this same process (exec keeps SIG_DFL)
_DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


def interruptible(command: list[str]) -> list[str]:
    """``command`` (its first item a path) started with SIGINT at its default, as a terminal's
    foreground job: the same pid, arguments and output once the exec is done."""
    return [sys.executable, "-c", _DEFAULT_SIGINT, *command]


def ignores_sigint(pid: int) -> bool:
    """Whether process ``pid`` ignores SIGINT (its SigIgn mask; False without /proc)."""
    status = Path(f"/proc/{pid}/status")
    if not status.exists():
        return False
    for line in status.read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGINT - 1) & 1)
    return False


def send_ctrl_c(process: subprocess.Popen) -> None:
    """SIGINT to ``process``, as Ctrl-C sends it; a process that ignores it fails the caller now
    (it would run on, and the caller wait its whole timeout)."""
    assert not ignores_sigint(process.pid), (
        f"process {process.pid} ignores SIGINT: start it with interruptible(command)"
    )
    process.send_signal(signal.SIGINT)
