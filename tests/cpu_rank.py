"""Test-only: one torchrun rank of ``python -m speculators_qwen_compat.train`` on CPU.

0.9's ``speculators.train.distributed.maybe_setup_distributed`` picks the process-group backend
of the accelerator and fails without one ("No accelerator found"). Here it sets the same
module state over a gloo group before ``speculators.train.cli`` binds the name, then runs our
train entry point unchanged: ``torchrun ... tests/cpu_rank.py TRAIN-ARGS``.
"""

from __future__ import annotations

import os
import sys


def _cpu_setup(sp_size: int = 1) -> None:
    import speculators.train.distributed as dist_state
    import torch.distributed as dist

    if "LOCAL_RANK" not in os.environ:
        return
    dist_state._local_rank = int(os.environ["LOCAL_RANK"])
    dist_state._is_distributed = True
    dist.init_process_group("gloo")
    dist_state._rank = dist.get_rank()
    dist_state._world_size = dist.get_world_size()
    dist_state._init_sp_process_groups(dist_state._rank, dist_state._world_size, sp_size)


def main() -> int:
    import speculators.train.distributed as dist_state

    dist_state.maybe_setup_distributed = _cpu_setup
    from speculators_qwen_compat.train import main as train_main

    return train_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
