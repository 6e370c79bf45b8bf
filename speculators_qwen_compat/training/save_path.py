"""A drafter's new folder goes beside its run (``beside``), never over ``--from-pretrained``'s.

Why: upstream writes run.yaml there and ``--save-best`` deletes every child of ``--save-path``
but the best epoch: the weights being fine-tuned would go. Checked by ``train`` before anything
runs and again by the fine_tune_dtype fix before the drafter is built (plain ``speculators.train``).
"""

from __future__ import annotations

from pathlib import Path

from speculators_qwen_compat.core.errors import CompatError

#: The link the trainer keeps to its best epoch (speculators 0.8+ ``checkpointer.py``).
BEST = "checkpoint_best"


def beside(drafter: str, suffix: str) -> str:
    """A new folder named after the drafter's run: ``out/dflash/0`` -> ``out/dflash-SUFFIX``
    (an epoch folder's parent is the run's ``--save-path``), any other ``DIR`` -> ``DIR-SUFFIX``."""
    folder = Path(drafter.rstrip("/") or drafter)
    run = folder.parent if folder.name.isdigit() or folder.name == BEST else folder
    return f"{run}-{suffix}"


def refuse_overlap(save: str | None, source: str | None) -> None:
    """Raises a one-line CompatError when ``save`` is, holds or lies in ``source`` (links
    followed); a Hub id or a missing argument passes."""
    if not save or not source or not Path(source).expanduser().exists():
        return  # a Hub id: nothing local to overwrite
    here, there = Path(save).expanduser().resolve(), Path(source).expanduser().resolve()
    if here == there:
        how = "is"
    elif here in there.parents:
        how = "holds"
    elif there in here.parents:
        how = "lies inside"
    else:
        return
    raise CompatError(
        f"--save-path {save} {how} --from-pretrained {source} (training there would overwrite "
        f"or delete the weights it loads): choose a new --save-path (e.g. "
        f"{beside(source, 'finetuned')})"
    )
