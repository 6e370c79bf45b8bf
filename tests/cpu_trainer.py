"""Test-only: upstream's Trainer (0.8, 0.9) on a machine without an accelerator; never shipped.

The one trainer-on-CPU shim, used in-process (``on_cpu()``, a context manager) and in training
subprocesses (``tests/cpu_site`` first on PYTHONPATH: its sitecustomize calls ``register()``,
which hooks the same changes onto the modules' import). It changes exactly what a CPU run needs:

- ``speculators.train.trainer``: the Trainer moves the model and every batch to
  ``get_local_rank()`` (the integer 0, i.e. ``cuda:0``: "Cannot access accelerator device when
  none is available"); here that name answers the CPU device. Its autocast region names the
  device type "cuda" when no accelerator exists, which disables autocast on CPU (DFlash then
  multiplies bf16 hidden states by float32 weights); here the Trainer's ``device_type`` is
  "cpu", so bf16 autocast runs as it does on a GPU (``--hidden-states-dtype float32`` turns
  autocast off, and is ~10x faster on CPU).
- the same module's step timer calls ``torch.accelerator.synchronize()`` on every logged step,
  which raises without an accelerator; here, with none available, it is a no-op (there is no
  device work to wait for).
- ``speculators.train.distributed`` (0.9): under torchrun, ``maybe_setup_distributed`` picks the
  process-group backend of the accelerator and fails without one ("No accelerator found");
  here, with none available, it sets the same module state over a gloo group (``torchrun ...
  -m speculators_qwen_compat.train ...`` with tests/cpu_site on PYTHONPATH; a rank binds the
  name from ``speculators.train.cli`` after this hook ran). Outside torchrun it is upstream's.
- ``speculators.train.dataloader``: the DataLoader is built with ``pin_memory=True``. Without
  an accelerator torch mostly warns and skips pinning, but a run whose batches are upstream's
  empty placeholders (every sample dropped) dies with "pin_memory=True requires a CUDA or other
  accelerator backend"; here it is built with ``pin_memory=False``.

The Triton fused loss is avoided with upstream's own flag ``--loss-implementation eager``.
When ``CPU_TRAINER_METRICS`` names a file, ``register()`` also appends every record of the
trainer's metric logger (``speculators.metrics``: losses and accuracies per step) to it as a JSON
line: upstream writes them only to tensorboard/wandb/trackio/mlflow, none of which is here.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from types import ModuleType
from typing import Any

TRAINER = "speculators.train.trainer"
DATALOADER = "speculators.train.dataloader"
DISTRIBUTED = "speculators.train.distributed"
LOGGER = "speculators.train.logger"
METRICS_ENV = "CPU_TRAINER_METRICS"


def patch_trainer(module: ModuleType) -> Callable[[], None]:
    """Put ``module`` (speculators.train.trainer) on the CPU; returns the undo."""
    import torch

    saved = (module.get_local_rank, module.Trainer.__init__, torch.accelerator.synchronize)
    local_rank, init, synchronize = saved

    def cpu_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.device_type = "cpu"

    def cpu_synchronize(*args: Any, **kwargs: Any) -> None:
        if torch.accelerator.is_available():
            synchronize(*args, **kwargs)

    module.get_local_rank = lambda: torch.device("cpu")
    module.Trainer.__init__ = cpu_init
    torch.accelerator.synchronize = cpu_synchronize

    def undo() -> None:
        module.get_local_rank, module.Trainer.__init__ = local_rank, init
        torch.accelerator.synchronize = synchronize

    return undo


def patch_dataloader(module: ModuleType) -> Callable[[], None]:
    """Build ``module``'s (speculators.train.dataloader) DataLoaders unpinned; returns the undo."""
    loader = module.DataLoader

    def data_loader(*args: Any, **kwargs: Any) -> Any:
        kwargs["pin_memory"] = False
        return loader(*args, **kwargs)

    module.DataLoader = data_loader

    def undo() -> None:
        module.DataLoader = loader

    return undo


def patch_distributed(module: ModuleType) -> Callable[[], None]:
    """Set ``module``'s (speculators.train.distributed) torchrun state over gloo when there is
    no accelerator; returns the undo."""
    import torch
    import torch.distributed as dist

    setup = module.maybe_setup_distributed

    def cpu_setup(sp_size: int = 1) -> None:
        if "LOCAL_RANK" not in os.environ or torch.accelerator.is_available():
            return setup(sp_size)
        module._local_rank = int(os.environ["LOCAL_RANK"])
        module._is_distributed = True
        dist.init_process_group("gloo")
        module._rank = dist.get_rank()
        module._world_size = dist.get_world_size()
        module._init_sp_process_groups(module._rank, module._world_size, sp_size)
        return None

    module.maybe_setup_distributed = cpu_setup

    def undo() -> None:
        module.maybe_setup_distributed = setup

    return undo


@contextmanager
def on_cpu() -> Iterator[None]:
    """Upstream's Trainer and dataloader on the CPU inside the block, as they were after it."""
    import importlib

    with ExitStack() as stack:
        stack.callback(patch_trainer(importlib.import_module(TRAINER)))
        stack.callback(patch_dataloader(importlib.import_module(DATALOADER)))
        yield


class JsonLinesMetrics(logging.Handler):
    """Appends each metric record (a mapping of numbers or tensors) with its step."""

    def __init__(self, path: str) -> None:
        super().__init__(logging.INFO)
        self.path = path

    def emit(self, record: logging.LogRecord) -> None:
        if not isinstance(record.msg, Mapping):
            return
        row = {"step": getattr(record, "step", None), **_plain(record.msg)}
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(json.dumps(row) + "\n")


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if hasattr(value, "item") and getattr(value, "numel", lambda: 0)() == 1:
        return float(value.item())
    return value if isinstance(value, (int, float, str, bool, type(None))) else str(value)


def register() -> None:
    """Apply the patches when upstream's modules are imported (training subprocesses)."""
    import wrapt

    wrapt.register_post_import_hook(patch_trainer, TRAINER)
    wrapt.register_post_import_hook(patch_dataloader, DATALOADER)
    wrapt.register_post_import_hook(patch_distributed, DISTRIBUTED)
    if os.environ.get(METRICS_ENV):
        wrapt.register_post_import_hook(log_metrics, LOGGER)


def log_metrics(module: ModuleType) -> None:
    """After ``module.setup_metric_logger`` (speculators.train.logger; its dictConfig replaces
    the metric logger's handlers), add the JSON-lines handler."""
    setup = module.setup_metric_logger

    def setup_and_log(*args: Any, **kwargs: Any) -> Any:
        result = setup(*args, **kwargs)
        metrics = logging.getLogger("speculators.metrics")
        metrics.addHandler(JsonLinesMetrics(os.environ[METRICS_ENV]))
        metrics.setLevel(logging.INFO)
        return result

    module.setup_metric_logger = setup_and_log


def subprocess_pythonpath(existing: str = "") -> str:
    """PYTHONPATH for a training subprocess: tests/cpu_site (its sitecustomize) and tests/
    (this module) before ``existing``."""
    from pathlib import Path

    here = Path(__file__).resolve().parent
    return os.pathsep.join(p for p in (str(here / "cpu_site"), str(here), existing) if p)
