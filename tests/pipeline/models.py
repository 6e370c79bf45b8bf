"""The pipeline tier's target checkpoints: tests/tiny_checkpoints.py at the sizes vLLM's CPU
kernels accept (``VLLM``), saved in bf16 as vLLM serves them.

Kinds (``KINDS``, one pipeline stage each): ``qwen3_5`` and ``qwen3_5_moe``, the Qwen3.6-27B and
-35B-A3B classes (``Qwen3_5ForConditionalGeneration`` / ``Qwen3_5MoeForConditionalGeneration``,
composite config, weights under ``model.language_model.*``, processor files beside them). Also
built: ``qwen3`` (an ``x*w`` Qwen3ForCausalLM; the ``x*w`` controls of the training fixes run
per release in tests/test_training_fixes.py) and ``qwen3_5_text`` / ``qwen3_5_moe_text``, the
text-only ``Qwen3_5ForCausalLM`` pair (the acceptance bench's verifiers).
"""

from __future__ import annotations

from pathlib import Path

import tiny_checkpoints as tiny

NUM_LAYERS = tiny.VLLM.layers
KINDS = ("qwen3_5", "qwen3_5_moe")
#: pipeline kind -> tiny_checkpoints kind
TINY_KIND = {
    "qwen3": "qwen3",
    "qwen3_5": "qwen35",
    "qwen3_5_moe": "qwen35_moe",
    "qwen3_5_text": "qwen35_text",
    "qwen3_5_moe_text": "qwen35_moe_text",
}
HYBRID = ("qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text")
COMPOSITE = ("qwen3_5", "qwen3_5_moe")
MOE = ("qwen3_5_moe", "qwen3_5_moe_text")


def build_target(kind: str, destination: Path, seed: int = 0, trained_like: bool = False) -> Path:
    """A ``kind`` checkpoint (bf16 safetensors, config, tokenizer, template; processor files for
    a composite kind) in ``destination``. ``trained_like``: final norm and lm_head spread like
    a trained model's (verifier_text.spread_like_trained)."""
    return tiny.write_checkpoint(
        destination, TINY_KIND[kind], trained_like, tiny.VLLM, seed, bf16=True,
        processor=kind in COMPOSITE,
    )  # fmt: skip
