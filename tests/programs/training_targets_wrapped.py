"""Which of sample_drops' three targets are wrapped after importing upstream's training modules
in a given order (test_import_order.py): ``training_targets_wrapped.py d r t`` imports
``speculators.train.data``, ``.recovery`` and ``.trainer`` in that order (the fixes on, by the
venv's .pth) and prints ``{"Trainer.run_training": true, ...}`` as JSON."""

from __future__ import annotations

import importlib
import json
import sys

MODULES = {"d": "speculators.train.data", "r": "speculators.train.recovery",
           "t": "speculators.train.trainer"}  # fmt: skip


def main(order: list[str]) -> int:
    for key in order:
        importlib.import_module(MODULES[key])
    data, recovery, trainer = (sys.modules[MODULES[k]] for k in "drt")
    wrapped = {
        "Trainer.run_training": trainer.Trainer.run_training,
        "BatchRecoveryCoordinator.consume": recovery.BatchRecoveryCoordinator.consume,
        "ArrowDataset._get_raw_data": data.ArrowDataset._get_raw_data,
    }
    print(json.dumps({name: hasattr(value, "__wrapped__") for name, value in wrapped.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
