"""A fix whose targets live in several modules is applied whatever order they are imported in.

Pins a bug of core/targets.py: ``speculators.train.data`` imports ``.recovery`` while its own
body runs, so recovery's post-import hook saw a half-imported ``data`` without
``ArrowDataset`` and refused sample_drops; ``BatchRecoveryCoordinator.consume`` stayed
unwrapped, training counted no kept sample, and a run that trained on nothing exited 0
(tests/pipeline caught it). A half-imported module's targets are now checked when its own
import finishes. Releases with upstream's Trainer (0.8, 0.9), where sample_drops applies."""

from __future__ import annotations

import json

import pytest
from conftest import RELEASE, run_program
from packaging.version import Version

pytestmark = pytest.mark.skipif(Version("0.8") > RELEASE, reason="the Trainer is 0.8's and 0.9's")


@pytest.mark.parametrize("order", ["t", "r d t"])
def test_sample_drops_wraps_every_target_in_any_import_order(order: str) -> None:
    result = run_program("training_targets_wrapped", *order.split())
    assert result.returncode == 0, result.stderr[-2000:]
    wrapped = json.loads(result.stdout.strip().splitlines()[-1])
    assert wrapped == dict.fromkeys(wrapped, True), f"imported in order {order}: {wrapped}"
