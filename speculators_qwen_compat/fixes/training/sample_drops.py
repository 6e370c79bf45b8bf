"""Fix: a training run never ends having trained on nothing, and says what it dropped.

Why: 0.8+ drop samples quietly; a served-name mismatch drops all, exit 0 (docs/upstream.md,
"Training: dropped samples"). Targets: ``consume``, ``_get_raw_data``, ``run_training``: drops
counted over ranks, none surviving a CompatError; a fix so every entry into the trainer has it.
"""

from __future__ import annotations

import json
import re
import sys
import urllib.request
from collections import Counter
from typing import Any

from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.core.fix import Fix, FixState, Patcher
from speculators_qwen_compat.core.targets import ReleaseRange, Resolved, Shape, Target
from speculators_qwen_compat.core.upstream import TRAIN_DATA, TRAIN_RECOVERY, TRAINER
from speculators_qwen_compat.fixes.training import stages

NAME_MISMATCH = re.compile(
    r"An explicit model name was passed \((?P<asked>.*?)\) which doesn't match\s*"
    r"found model_id (?P<served>\S+?)\.?(?:Please|$)"
)


class _Run:
    """What the current run kept and dropped, per phase (training, validation)."""

    def __init__(self) -> None:
        self.kept: Counter[str] = Counter()
        self.dropped: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()
        self.endpoint: str | None = None
        self.verifier: str | None = None


_run = _Run()


RUN_TRAINING = Target(TRAINER, "Trainer.run_training")
CONSUME = Target(TRAIN_RECOVERY, "BatchRecoveryCoordinator.consume", params=("batch",))
RAW_DATA = Target(TRAIN_DATA, "ArrowDataset._get_raw_data")


class SampleDropsFix(Fix):
    name = "sample_drops"
    summary = "count the samples training drops; no surviving sample is a fatal error"
    modules = (TRAINER, TRAIN_RECOVERY, TRAIN_DATA)
    shapes = (
        Shape(
            "dropped samples are counted; a run that trained on none fails",
            (RUN_TRAINING, CONSUME, RAW_DATA),
        ),
    )
    applies_on = ReleaseRange("0.8.1", "0.9.0")
    outside_range = FixState.NOT_APPLICABLE  # <= 0.7: the trainer, without BatchRecoveryCoordinator

    def apply(self, found: Resolved, patcher: Patcher) -> None:
        for target, wrapper in (
            (RUN_TRAINING, _run_training),
            (CONSUME, _consume),
            (RAW_DATA, _get_raw_data),
        ):
            if found.here(target) and target.path in stages.ORDER:  # shared with other fixes
                stages.wrap(found, patcher, target, self.name, wrapper)
            elif found.here(target):
                patcher.wrap(*found.owner_and_name(target), wrapper)


def _consume(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    batch = args[0] if args else kwargs.get("batch")
    if isinstance(batch, dict):
        phase = str(getattr(instance, "phase", "training"))
        dropped = batch.get("error_records", 0)
        _run.dropped[phase] += int(dropped) if isinstance(dropped, int) else 0
        documents = batch.get("document_ids")
        if documents is not None and hasattr(documents, "unique"):
            _run.kept[phase] += int(documents[documents >= 0].unique().numel())
    return wrapped(*args, **kwargs)


def _get_raw_data(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    _run.endpoint = getattr(instance, "vllm_endpoint", _run.endpoint)
    _run.verifier = getattr(instance, "model", None) or _run.verifier
    result = wrapped(*args, **kwargs)
    if type(result).__name__ == "SampleUnavailable":
        _run.reasons[_reason(getattr(result, "reason", "") or "")] += 1
    return result


def _reason(text: str) -> str:
    """A drop's reason without its sample numbers: the error after upstream's prefix."""
    text = " ".join(text.split())
    if "): " in text:  # "Hidden-state round trip failed for ... (attempt 3/3, ...): Error: ..."
        text = text.split("): ", 1)[1]
    text = re.sub(r"\b(sample|index) \d+", r"\1 N", text)
    return text[:300] or "hidden states unavailable (--on-missing skip)"


def _run_training(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    global _run
    _run = _Run()
    dataset = getattr(getattr(instance, "train_loader", None), "dataset", None)
    _run.endpoint = getattr(dataset, "vllm_endpoint", None)
    _run.verifier = getattr(dataset, "model", None)
    on_missing = getattr(dataset, "on_missing", None)
    result = wrapped(*args, **kwargs)
    _sum_over_ranks()
    kept, dropped = _run.kept["training"], _run.dropped["training"]
    if dropped == 0 and _run.dropped["validation"] == 0:
        return result
    if kept == 0 and dropped > 0:
        raise CompatError(_nothing_trained(dropped, on_missing))
    if _rank() == 0:
        print(f"speculators_qwen_compat: {summary()}", file=sys.stderr, flush=True)
    return result


def _rank() -> int:
    try:
        import torch.distributed as dist

        return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    except Exception:
        return 0


def _sum_over_ranks() -> None:
    """Under torchrun each rank counts its own batches (upstream lets a rank go on with locally
    empty batches while others train): add the counts up so every rank decides the same."""
    try:
        import torch
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return
        device = torch.device("cpu")
        if dist.get_backend() == "nccl" and torch.cuda.is_available():
            device = torch.device("cuda", torch.cuda.current_device())
        phases = ("training", "validation")
        counts = [_run.kept[p] for p in phases] + [_run.dropped[p] for p in phases]
        total = torch.tensor(counts, dtype=torch.int64, device=device)
        dist.all_reduce(total)
        values = [int(v) for v in total.tolist()]
    except Exception:  # counting must never break the end of a run
        return
    for i, phase in enumerate(phases):
        _run.kept[phase], _run.dropped[phase] = values[i], values[i + 2]


def summary() -> str:
    """``trained on K samples; dropped N of M: J x "reason", ...`` for the last run."""
    kept, dropped = _run.kept["training"], _run.dropped["training"]
    text = f"trained on {kept} samples; dropped {dropped} of {kept + dropped}"
    if _run.reasons:
        text += ": " + ", ".join(f'{n} x "{r}"' for r, n in _run.reasons.most_common(3))
    val_dropped = _run.dropped["validation"]
    if val_dropped:
        text += f" (validation dropped {val_dropped} of {val_dropped + _run.kept['validation']})"
    return text


def _nothing_trained(dropped: int, on_missing: str | None) -> str:
    head = f"training dropped every one of its {dropped} samples and trained on nothing"
    mismatch = _name_mismatch()
    if mismatch is not None:
        asked, served = mismatch
        return (
            f'{head}: the server at {_run.endpoint} serves "{served}" but '
            f'--verifier-name-or-path is "{asked}" (upstream drops each sample whose server '
            f'name differs); restart vLLM with --served-model-name "{asked}", or check '
            "--vllm-endpoint"
        )
    if _run.reasons:
        reason, count = _run.reasons.most_common(1)[0]
        return f'{head}: {count} x "{reason}"; fix that cause and rerun'
    if on_missing in ("skip", "warn"):
        return (
            f"{head}: no hidden states were found under --data-path (--on-missing {on_missing}); "
            "generate them first (speculators generate-offline-data) or use --on-missing generate"
        )
    return f"{head}; rerun with --num-workers 0 to see each sample's reason"


def _name_mismatch() -> tuple[str, str] | None:
    """(name asked for, name served) from the drop reasons, else from the server itself."""
    for reason in _run.reasons:
        found = NAME_MISMATCH.search(reason)
        if found:
            return found["asked"], found["served"]
    if not _run.endpoint or not _run.verifier:
        return None
    try:
        with urllib.request.urlopen(_run.endpoint.rstrip("/") + "/models", timeout=10) as reply:
            served = json.load(reply)["data"][0]["id"]
    except Exception:
        return None
    return (_run.verifier, served) if served != _run.verifier else None
