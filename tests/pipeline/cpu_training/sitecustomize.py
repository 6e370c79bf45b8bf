"""Test-only: speculators 0.9's trainer on a machine without an accelerator; never shipped.

The pipeline tier puts this folder first on PYTHONPATH of its training subprocesses only
(``python -m speculators_qwen_compat.train ...``). It changes exactly what a CPU run needs:

- ``speculators.train.trainer``: the Trainer moves the model and every batch to
  ``get_local_rank()`` (the integer 0, i.e. ``cuda:0``: "Cannot access accelerator device when
  none is available"); here that name answers the CPU device. Its autocast region names the
  device type "cuda" when no accelerator exists, which disables autocast on CPU (DFlash then
  multiplies bf16 hidden states by float32 weights); here the Trainer's ``device_type`` is
  "cpu", so bf16 autocast runs as it does on a GPU.
- the same module's step timer calls ``torch.accelerator.synchronize()`` on every logged step,
  which raises without an accelerator; here, with none available, it is a no-op (there is no
  device work to wait for).
- ``speculators.train.dataloader``: the DataLoader is built with ``pin_memory=True``. Without
  an accelerator torch mostly warns and skips pinning, but a run whose batches are upstream's
  empty placeholders (every sample dropped) dies with "pin_memory=True requires a CUDA or other
  accelerator backend"; here it is built with ``pin_memory=False``.

The Triton fused loss is avoided with upstream's own flag ``--loss-implementation eager``.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any


def _cpu_trainer(module: ModuleType) -> None:
    import torch

    module.get_local_rank = lambda: torch.device("cpu")
    synchronize = torch.accelerator.synchronize

    def cpu_synchronize(*args: Any, **kwargs: Any) -> None:
        if torch.accelerator.is_available():
            synchronize(*args, **kwargs)

    torch.accelerator.synchronize = cpu_synchronize
    init = module.Trainer.__init__

    def cpu_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.device_type = "cpu"

    module.Trainer.__init__ = cpu_init


def _unpinned_loader(module: ModuleType) -> None:
    loader = module.DataLoader

    def data_loader(*args: Any, **kwargs: Any) -> Any:
        kwargs["pin_memory"] = False
        return loader(*args, **kwargs)

    module.DataLoader = data_loader


try:
    import wrapt
except ImportError:  # not a training interpreter of the test venvs
    pass
else:
    wrapt.register_post_import_hook(_cpu_trainer, "speculators.train.trainer")
    wrapt.register_post_import_hook(_unpinned_loader, "speculators.train.dataloader")
