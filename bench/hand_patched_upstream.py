"""speculators 0.5.0 as a user without this package would run it: the git-only
``scripts/prepare_data.py`` path (upstream's ``load_and_preprocess_dataset``, then
``save_to_disk``) with only the one-line fix for the assistant-mask probe.

Run with ``SPECULATORS_QWEN_COMPAT=0`` so the venv-wide hook stays idle:
``python hand_patched_upstream.py MODEL DATA OUTPUT SEQ_LENGTH WORKERS``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from speculators.data_generation import preprocessing

_probe = preprocessing._supports_assistant_mask


def _probe_never_raises(tokenizer: Any) -> bool:
    """The hand patch: any error of the probe means "no HF assistant mask"."""
    try:
        return _probe(tokenizer)
    except Exception:
        return False


def main() -> None:
    model, data, output, seq_length, workers = sys.argv[1:6]
    if hasattr(preprocessing._supports_assistant_mask, "__wrapped__"):
        sys.exit("the compat fixes are active; run with SPECULATORS_QWEN_COMPAT=0")
    preprocessing._supports_assistant_mask = _probe_never_raises
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    dataset, _ = preprocessing.load_and_preprocess_dataset(
        target_model_path=model,
        train_data_paths=[data],
        seq_length=int(seq_length),
        build_dataset_num_proc=int(workers),
        token_freq_path=out / "token_freq.pt",
    )
    dataset.save_to_disk(str(out))


if __name__ == "__main__":
    main()
