"""The temporary folder must leave room for the map workers' socket: checked before a run.

Why: ``Dataset.map`` talks to its workers through a Unix socket under ``$TMPDIR``; past Linux's
107 bytes its manager dies and the run sees a bare ``EOFError`` (docs/faults.md; found in CI).
Here the run ends first, naming the folder and the fix.
"""

from __future__ import annotations

import os
import tempfile

from speculators_qwen_compat.core.errors import CompatError

#: sun_path holds 108 bytes with its terminating NUL (Linux ``sys/un.h``)
SOCKET_PATH_LIMIT = 107
#: what multiprocess adds to the temporary folder: ``/pymp-`` + 8, ``/listener-`` + 8
#: (``util.get_temp_dir``, ``connection.arbitrary_address``)
MANAGER_SUFFIX = len("/pymp-12345678/listener-12345678")


def check_temp_folder() -> None:
    """Raise CompatError when the manager's socket path would not fit in the temporary folder."""
    folder = tempfile.gettempdir()
    length = len(os.fsencode(folder)) + MANAGER_SUFFIX
    if length > SOCKET_PATH_LIMIT:
        room = SOCKET_PATH_LIMIT - MANAGER_SUFFIX
        raise CompatError(
            f"the temporary folder {folder} is too long for the map workers' socket "
            f"({length} bytes with multiprocess's names; a Unix socket path holds "
            f"{SOCKET_PATH_LIMIT}): set TMPDIR to a folder of at most {room} bytes, "
            "e.g. TMPDIR=/tmp"
        )
