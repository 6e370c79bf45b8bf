"""Keep Python's cyclic garbage collector off what a command imported and will keep.

Why: upstream's import (speculators pulls in torch and its compiler, transformers, datasets,
pandas) leaves millions of objects alive for the whole run; every full collection walks all of
them again, and the interpreter's exit walks them once more: measured here, 3.4 s of the 17.5 s
of CPU a 0.9.0 demo-sized prepare_data run takes. ``gc.freeze()`` moves every object that exists
to a generation the collector never scans (the Python docs' own advice before forking workers,
as datasets' map does: the workers then leave those pages unwritten). Objects are still freed by
reference counting; atexit handlers and weakref finalizers still run. Called by this package's
own commands only (prepare_data, status, doctor), never on the .pth path or in ``run`` and
``train``, whose process is the user's or upstream's program.

``importing()`` also keeps the collector off while upstream is imported: the import allocates
those millions of objects, and each threshold crossed on the way set off a collection that
walked the growing heap again (measured here: 0.6-0.9 s of CPU of a 0.9.0 prepare_data run on
2,000 conversations); an import makes almost no cyclic garbage, and what it makes is frozen
with the rest.
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
