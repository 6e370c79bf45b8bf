"""Run as ``python -m speculators_qwen_compat.run verifier_norm_check.py HS_FILE (CKPT OUT)...``:
loads each trained drafter checkpoint the way upstream does (``SpeculatorModel.from_pretrained``,
the training fixes on), applies its ``verifier_norm`` to the last layer of an extracted
hidden-states file, and saves the result to OUT for the test to compare with transformers."""

from __future__ import annotations

import sys

import torch
from safetensors.torch import load_file, save_file
from speculators.model import SpeculatorModel


def main(states: str, pairs: list[str]) -> None:
    last = load_file(states)["hidden_states"][:, -1].float()
    for checkpoint, out in zip(pairs[::2], pairs[1::2], strict=True):
        drafter = SpeculatorModel.from_pretrained(checkpoint).float().eval()
        with torch.no_grad():
            normed = drafter.verifier_norm(last)
        save_file({"normed": normed.contiguous()}, out)
        print(checkpoint, type(drafter.verifier_norm).__name__)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
