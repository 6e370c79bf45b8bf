"""Keep Python's cyclic garbage collector off what a command imported and will keep.

Why: upstream's import leaves millions of long-lived objects that every full collection and the
exit walk again (docs/maintainers.md, "Speed"). ``gc.freeze()`` puts them out of the collector's
reach and ``importing()`` pauses it during the import. Our own commands only, never ``run``.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn


@contextmanager
def importing() -> Iterator[None]:
    """The collector paused for the block (upstream's import), everything then frozen, and the
    collector back as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        freeze()
        if enabled:
            gc.enable()


def freeze() -> None:
    """Move every object that exists now out of the collector's reach (see the module)."""
    gc.freeze()


def exit_with(code: int) -> NoReturn:
    """``sys.exit(code)`` after freezing the command's own objects too: the interpreter's exit
    then skips a collection over everything the run made and kept."""
    freeze()
    sys.exit(code)
