"""Run on one speculators release with the fixes off: every drafter type it trains, saved as a
user's plain speculators saves it, and whether its verifier_norm is the verifier's own norm.

``python upstream_norm_folders.py OUT KIND...``: for each tiny verifier kind (tests/
tiny_checkpoints.py, written to OUT/<kind>) and each drafter type (tests/drafters.py: the
release's own construction path), the drafter is saved under OUT/<kind>-<type>, and its
``verifier_norm`` is run beside the verifier's own final norm (transformers' module, the oracle)
on the same input. OUT/answers.json: ``{folder: true when they agree}``. Run with the switch off
(``SPECULATORS_QWEN_COMPAT=0``): no fix is installed, the answer is upstream's alone (only the
tiny tokenizer comes from the package's demo files).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import drafters
import tiny_checkpoints as tiny
import torch


def main(out: Path, kinds: list[str]) -> None:
    answers: dict[str, bool] = {}
    h = torch.randn(4, tiny.HIDDEN, generator=torch.Generator().manual_seed(1)) * 3
    for kind in kinds:
        verifier = tiny.write_checkpoint(out / kind, kind)
        oracle = tiny.final_norm(tiny.build_model(kind))
        for speculator_type in drafters.drafter_types():
            folder = out / f"{kind}-{speculator_type}"
            drafter = drafters.build_drafter(verifier, speculator_type, folder / "run")
            with torch.no_grad():
                gap = (drafter.verifier_norm(h) - oracle(h)).abs().max().item()
            drafter.save_pretrained(str(folder))
            answers[str(folder)] = gap < 1e-5
    import speculators_qwen_compat

    assert not speculators_qwen_compat.installed(), "the fixes were on"
    (out / "answers.json").write_text(json.dumps(answers))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
