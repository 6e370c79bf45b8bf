"""Test-only: upstream's Trainer (0.9) on a machine without an accelerator; never shipped.

The Trainer moves the model and every batch to ``get_local_rank()`` (the integer 0, meaning
``cuda:0`` here: "Cannot access accelerator device when none is available"), names the autocast
device "cuda" when there is no accelerator, and its step timer calls
``torch.accelerator.synchronize()``. ``on_cpu`` answers the CPU for the first, sets the
Trainer's ``device_type`` to "cpu" (bf16 autocast as on a GPU) and makes the synchronisation a
no-op while no accelerator exists; everything else is upstream's own code.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def on_cpu() -> Iterator[None]:
    import speculators.train.trainer as trainer_module
    import torch

    saved = (trainer_module.get_local_rank, trainer_module.Trainer.__init__)
    synchronize = torch.accelerator.synchronize
    init = trainer_module.Trainer.__init__

    def cpu_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.device_type = "cpu"

    def cpu_synchronize(*args: Any, **kwargs: Any) -> None:
        if torch.accelerator.is_available():
            synchronize(*args, **kwargs)

    trainer_module.get_local_rank = lambda: torch.device("cpu")
    trainer_module.Trainer.__init__ = cpu_init
    torch.accelerator.synchronize = cpu_synchronize
    try:
        yield
    finally:
        trainer_module.get_local_rank, trainer_module.Trainer.__init__ = saved
        torch.accelerator.synchronize = synchronize
