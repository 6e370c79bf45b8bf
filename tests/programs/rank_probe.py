"""One torchrun rank: are the fixes on here and in a child it spawns? (test_drop_in.py)

``torchrun ... rank_probe.py`` prints ``RANK R patched=BOOL child=BOOL`` per rank: whether
``_preprocess_batch`` is wrapped in the rank and in a process the rank starts with spawn."""

from __future__ import annotations

import multiprocessing as mp
import os
from typing import Any


def wrapped_here() -> bool:
    import speculators.data_generation.preprocessing as preprocessing

    return hasattr(preprocessing._preprocess_batch, "__wrapped__")


def child(queue: Any) -> None:
    queue.put(wrapped_here())


if __name__ == "__main__":
    patched = wrapped_here()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    process = ctx.Process(target=child, args=(queue,))
    process.start()
    in_child = queue.get()
    process.join()
    print(f"RANK {os.environ['RANK']} patched={patched} child={in_child}")
