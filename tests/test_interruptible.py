"""tests/interruptible.py: why a Ctrl-C test can time out when the suite was started with SIGINT
ignored (test_regen_bad_day.py's once ran 120 s, the run going on past the SIGINT), and that a
child started through ``interruptible`` hears it all the same."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from interruptible import ignores_sigint, interruptible, send_ctrl_c

pytestmark = pytest.mark.pure  # release-independent: run once (tools/matrix.py)

#: a parent that ignores SIGINT (as ``sh -c 'cmd &'`` makes it) and starts the command after it
IGNORING = [
    sys.executable, "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "os.execv(sys.argv[1], sys.argv[1:])",
]  # fmt: skip
#: waits in asyncio.run as regenerate-responses does; says when it waits
WAITER = [
    sys.executable, "-c",
    "import asyncio\nasync def main():\n    print('waiting', flush=True)\n"
    "    await asyncio.sleep(30)\nasyncio.run(main())",
]  # fmt: skip


def started(command: list[str]) -> subprocess.Popen:
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline() == "waiting\n"
    return process


def test_sigint_ignored_by_the_parent_is_dropped_unless_the_child_is_interruptible() -> None:
    deaf = started([*IGNORING, *WAITER])
    try:
        assert ignores_sigint(deaf.pid)
        deaf.send_signal(signal.SIGINT)
        with pytest.raises(subprocess.TimeoutExpired):  # the cause: the run goes on
            deaf.wait(timeout=1)
        with pytest.raises(AssertionError, match="ignores SIGINT"):
            send_ctrl_c(deaf)
    finally:
        deaf.kill()
        deaf.communicate()
    hearing = started([*IGNORING, *interruptible(WAITER)])
    send_ctrl_c(hearing)
    _, stderr = hearing.communicate(timeout=20)
    # an uncaught KeyboardInterrupt ends Python as SIGINT does (3.8+: the shell sees the signal)
    assert hearing.returncode == -signal.SIGINT, stderr
    assert stderr.rstrip().endswith("KeyboardInterrupt"), stderr
