"""Tiny random checkpoints, built with transformers' own classes: the one builder of the tests,
the pipeline tier and the acceptance bench.

Kinds:
- ``qwen35`` / ``qwen35_moe``: the Qwen3.5/3.6 architecture as published (``Qwen3_5Config`` +
  ``Qwen3_5ForConditionalGeneration``, and the MoE pair; Qwen3.6-27B and -35B-A3B are these):
  composite config with ``text_config`` (hybrid ``layer_types``, partial rotary with mrope) and
  ``vision_config``, weights under ``model.language_model.*`` and ``model.visual.*``;
- ``qwen35_text`` / ``qwen35_moe_text``: the text-only ``Qwen3_5ForCausalLM`` and MoE pair
  (weights under ``model.*``);
- ``qwen3`` / ``llama``: ``x*w`` controls.

Sizes: ``UNIT`` for transformers-only checks; ``VLLM``, the smallest the vLLM 0.32 CPU kernels
accept (docs/maintainers.md, "The whole pipeline on CPU"): attention head_dim 32, Gated DeltaNet
key/value head dims 128 (bf16), an mrope_section that fits the rotary part of head_dim 32 at
partial_rotary_factor 0.25, eight layers (speculators' default EAGLE-3 layers [2, 4, 5]).
Final-norm weights are drawn away from zero so ``x*w`` and ``x*(1+w)`` differ clearly. A folder
gets the bundled tiny tokenizer and template (demo/tiny-qwen36) and, when asked, the processor
files AutoProcessor and vLLM read for a composite checkpoint (``preprocessor_config.json``,
``video_preprocessor_config.json``: ../shared/reference/real-parts.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifier_text import spread_like_trained

from speculators_qwen_compat import demo


@dataclass(frozen=True)
class Sizes:
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    vocab: int  # > the tiny tokenizer's 1210 ids
    max_positions: int
    linear_key_heads: int
    linear_value_heads: int
    linear_head_dim: int
    rope_theta: float
    experts: int
    moe_intermediate: int
    head_dim: int = 32
    special_ids: tuple[tuple[str, int], ...] = ()


UNIT = Sizes(
    hidden=64, intermediate=128, layers=4, heads=2, kv_heads=1, vocab=1280, max_positions=512,
    linear_key_heads=2, linear_value_heads=2, linear_head_dim=32, rope_theta=10_000_000.0,
    experts=4, moe_intermediate=32,
)  # fmt: skip
VLLM = Sizes(
    hidden=128, intermediate=256, layers=8, heads=4, kv_heads=2, vocab=1216, max_positions=2048,
    linear_key_heads=1, linear_value_heads=2, linear_head_dim=128, rope_theta=10_000.0,
    experts=8, moe_intermediate=64, special_ids=(("eos_token_id", 2), ("pad_token_id", 0)),
)  # fmt: skip

HIDDEN = UNIT.hidden
VOCAB = UNIT.vocab  # upstream adds <|MASK|> in a free slot above the tokenizer's ids
KINDS = ("qwen35", "qwen35_moe", "qwen3", "llama")
ONE_PLUS_WEIGHT_KINDS = ("qwen35", "qwen35_moe")


def _text_fields(sizes: Sizes) -> dict[str, Any]:
    return {
        "vocab_size": sizes.vocab,
        "hidden_size": sizes.hidden,
        "intermediate_size": sizes.intermediate,
        "num_hidden_layers": sizes.layers,
        "num_attention_heads": sizes.heads,
        "num_key_value_heads": sizes.kv_heads,
        "head_dim": sizes.head_dim,
        "max_position_embeddings": sizes.max_positions,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False,
        **dict(sizes.special_ids),
    }


def _qwen35_text(sizes: Sizes, moe: bool) -> dict[str, Any]:
    fields = _text_fields(sizes)
    fields.update(
        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"]
        * (sizes.layers // 4),
        linear_key_head_dim=sizes.linear_head_dim,
        linear_value_head_dim=sizes.linear_head_dim,
        linear_num_key_heads=sizes.linear_key_heads,
        linear_num_value_heads=sizes.linear_value_heads,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": sizes.rope_theta,
            "partial_rotary_factor": 0.25,
            "mrope_section": [2, 1, 1],
            "mrope_interleaved": True,
        },
    )
    if moe:
        fields.update(
            num_experts=sizes.experts,
            num_experts_per_tok=2,
            moe_intermediate_size=sizes.moe_intermediate,
            shared_expert_intermediate_size=sizes.moe_intermediate,
        )
    return fields


def _vision(sizes: Sizes) -> dict[str, Any]:
    return {
        "depth": 1,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 2,
        "out_hidden_size": sizes.hidden,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "num_position_embeddings": 64,
    }


#: config.json's vision token fields and the tokens they name (transformers' defaults are the
#: real Qwen3.5/3.6 ids; vLLM and the model find images in the ids by these fields).
VISION_TOKENS = {
    "image_token_id": "<|image_pad|>",
    "video_token_id": "<|video_pad|>",
    "vision_start_token_id": "<|vision_start|>",
    "vision_end_token_id": "<|vision_end|>",
}


def vision_token_ids() -> dict[str, int]:
    """The vision token fields pointing at the tiny tokenizer's own ids."""
    added = json.loads((demo.MODEL_DIR / "tokenizer.json").read_text(encoding="utf-8"))
    ids = {token["content"]: token["id"] for token in added["added_tokens"]}
    return {field: ids[token] for field, token in VISION_TOKENS.items()}


def model_class_and_config(kind: str, sizes: Sizes = UNIT) -> tuple[Any, Any]:
    """transformers' model class and config of ``kind`` at ``sizes``."""
    import transformers as tf

    moe = "moe" in kind
    if kind in ("qwen35", "qwen35_moe"):
        config_class = tf.Qwen3_5MoeConfig if moe else tf.Qwen3_5Config
        model_class = (
            tf.Qwen3_5MoeForConditionalGeneration if moe else tf.Qwen3_5ForConditionalGeneration
        )
        config = config_class(text_config=_qwen35_text(sizes, moe), vision_config=_vision(sizes))
        config.text_config.update(dict(sizes.special_ids))
        config.update(vision_token_ids())
    elif kind in ("qwen35_text", "qwen35_moe_text"):
        config_class = tf.Qwen3_5MoeTextConfig if moe else tf.Qwen3_5TextConfig
        model_class = tf.Qwen3_5MoeForCausalLM if moe else tf.Qwen3_5ForCausalLM
        config = config_class(**_qwen35_text(sizes, moe))
    elif kind == "qwen3":
        config, model_class = tf.Qwen3Config(**_text_fields(sizes)), tf.Qwen3ForCausalLM
    elif kind == "llama":
        config, model_class = tf.LlamaConfig(**_text_fields(sizes)), tf.LlamaForCausalLM
    else:
        raise ValueError(kind)
    config.architectures = [model_class.__name__]
    return model_class, config


def build_model(kind: str, trained_like: bool = False, sizes: Sizes = UNIT, seed: int = 0) -> Any:
    """The tiny random model of ``kind`` (a transformers model, eval mode, float32).

    ``trained_like``: final norm and lm_head spread as verifier_text.spread_like_trained does
    (the verifier of the training-target checks and the acceptance bench); else final-norm
    weights 0.75 +- 0.5."""
    import torch

    torch.manual_seed(seed)
    model_class, config = model_class_and_config(kind, sizes)
    config._attn_implementation = "sdpa"
    model = model_class(config).eval()
    norm = final_norm(model)
    if trained_like:
        spread_like_trained(model, norm, seed)
        return model
    with torch.no_grad():  # away from zero: x*w and x*(1+w) differ everywhere
        norm.weight.copy_(torch.randn(norm.weight.shape) * 0.5 + 0.75)
    return model


def final_norm(model: Any) -> Any:
    """The verifier's own final norm module (the oracle of the tests)."""
    inner = model.model
    return inner.language_model.norm if hasattr(inner, "language_model") else inner.norm


def write_checkpoint(
    folder: Path, kind: str, trained_like: bool = False, sizes: Sizes = UNIT, seed: int = 0,
    bf16: bool = False, processor: bool = False,
) -> Path:  # fmt: skip
    """Save the tiny ``kind`` model (safetensors + config.json; ``bf16`` as vLLM serves it)
    with the tiny tokenizer; ``processor``: the processor files too (a composite kind), else
    none (no processor can be built: the mask-token fallback's case)."""
    import torch

    model = build_model(kind, trained_like, sizes, seed)
    if bf16:
        model = model.to(torch.bfloat16)
    model.save_pretrained(folder)
    demo.write_model(folder, "qwen36")
    if processor:
        write_processor_files(folder)
    return folder


def write_processor_files(folder: Path, limits: dict[str, Any] | None = None) -> None:
    """What AutoProcessor (Qwen3VLProcessor) and vLLM's multimodal loader read besides the
    tokenizer: the image and video processor configs (patch 16, merge 2, as the model's);
    ``limits``: the image processor's pixel limits (``min_pixels``/``max_pixels`` or ``size``),
    else the class defaults."""
    common = {"patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
              "processor_class": "Qwen3VLProcessor"}  # fmt: skip
    image = {"image_processor_type": "Qwen2VLImageProcessor", **common, **(limits or {})}
    files = {
        "preprocessor_config.json": image,
        "video_preprocessor_config.json": {"video_processor_type": "Qwen3VLVideoProcessor",
                                           **common},
    }  # fmt: skip
    for name, body in files.items():
        (folder / name).write_text(json.dumps(body, indent=1), encoding="utf-8")
