"""The training functions several fixes wrap, and the order of their stages there, outer to inner:
each such function carries one wrapper (core/fix.py ``Route``) whatever order the fixes apply in
(tests/test_route.py checks it is what applies)."""

from __future__ import annotations

from typing import Any

from speculators_qwen_compat.core.fix import Patcher
from speculators_qwen_compat.core.targets import Resolved, Target

#: upstream function (its path in its module) -> the fixes wrapping it, outer to inner.
ORDER: dict[str, tuple[str, ...]] = {
    # the drafter marked as trained in this process; a drafter vLLM would serve differently
    # refused at start; dropped samples counted
    "Trainer.run_training": ("trained_record", "served_attention", "sample_drops"),
    # a record of what the weights trained with; attention types and the rope config saved as
    # vLLM serves and loads them
    "SpeculatorModel.save_pretrained": ("trained_record", "served_attention", "served_rope"),
}


def wrap(found: Resolved, patcher: Patcher, target: Target, fix: str, wrapper: Any) -> None:
    """Wrap ``target`` as ``fix``'s stage of the one wrapper its function carries."""
    order = ORDER[target.path]
    if fix not in order:
        raise KeyError(f"fixes/training/stages.py: no stage of {fix} at {target.path}")
    patcher.wrap_stage(*found.owner_and_name(target), order, fix, wrapper)
