"""speculators as a user without this package would run it: the git-only
``scripts/prepare_data.py`` path (upstream's ``load_and_preprocess_dataset``, then
``save_to_disk``) with only the one-line fix for the assistant-mask probe (0.5-0.7), or with the
vLLM render server's URL (0.8+, which render only through vLLM).

Run with ``SPECULATORS_QWEN_COMPAT=0`` so the venv-wide hook stays idle:
``python hand_patched_upstream.py MODEL DATA OUTPUT SEQ_LENGTH WORKERS [RENDER_URL]``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from speculators.data_generation import preprocessing

_probe = getattr(preprocessing, "_supports_assistant_mask", None)


def _probe_never_raises(tokenizer: Any) -> bool:
    """The hand patch: any error of the probe means "no HF assistant mask"."""
    try:
        return bool(_probe and _probe(tokenizer))
    except Exception:
        return False


def main() -> None:
    model, data, output, seq_length, workers = sys.argv[1:6]
    endpoint = sys.argv[6] if len(sys.argv) > 6 else ""
    if hasattr(preprocessing.load_raw_dataset, "__wrapped__"):
        sys.exit("the compat fixes are active; run with SPECULATORS_QWEN_COMPAT=0")
    extra: dict[str, Any] = {"render_endpoint": endpoint} if endpoint else {}
    if _probe is not None:
        preprocessing._supports_assistant_mask = _probe_never_raises
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    dataset, _ = preprocessing.load_and_preprocess_dataset(
        target_model_path=model,
        train_data_paths=[data],
        seq_length=int(seq_length),
        build_dataset_num_proc=int(workers),
        token_freq_path=out / "token_freq.pt",
        **extra,
    )
    dataset.save_to_disk(str(out))


if __name__ == "__main__":
    main()
