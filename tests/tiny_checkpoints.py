"""Tiny random checkpoints for the training tests, built with transformers' own classes.

``qwen35`` / ``qwen35_moe``: the Qwen3.5/3.6 architecture as published (``Qwen3_5Config`` +
``Qwen3_5ForConditionalGeneration``, and the MoE pair): composite config with ``text_config``
(hybrid ``layer_types``, partial rotary with mrope) and ``vision_config``, weights under
``model.language_model.*`` and ``model.visual.*``. ``qwen3`` / ``llama``: ``x*w`` controls.
Final-norm weights are drawn away from zero so ``x*w`` and ``x*(1+w)`` differ clearly. The
folder gets the bundled tiny tokenizer and no processor files (no preprocessor_config.json).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verifier_text import spread_like_trained

from speculators_qwen_compat import demo

HIDDEN = 64
HEADS = 2
HEAD_DIM = 32
LAYERS = 4
VOCAB = 1280  # > the tiny tokenizer's 1210 tokens: upstream adds <|MASK|> in a free slot
KINDS = ("qwen35", "qwen35_moe", "qwen3", "llama")
ONE_PLUS_WEIGHT_KINDS = ("qwen35", "qwen35_moe")


def _text_fields() -> dict[str, Any]:
    return {
        "vocab_size": VOCAB,
        "hidden_size": HIDDEN,
        "intermediate_size": 128,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": 1,
        "head_dim": HEAD_DIM,
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False,
    }


def _qwen35_text(moe: bool) -> dict[str, Any]:
    fields = _text_fields()
    fields.update(
        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        linear_key_head_dim=32,
        linear_value_head_dim=32,
        linear_num_key_heads=2,
        linear_num_value_heads=2,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10000000.0,
            "partial_rotary_factor": 0.25,
            "mrope_section": [2, 1, 1],
            "mrope_interleaved": True,
        },
    )
    if moe:
        fields.update(
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=32,
        )
    return fields


def _vision() -> dict[str, Any]:
    return {
        "depth": 1,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 2,
        "out_hidden_size": HIDDEN,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "num_position_embeddings": 64,
    }


def build_model(kind: str, trained_like: bool = False) -> Any:
    """The tiny random model of ``kind`` (a transformers model, eval mode, float32).

    ``trained_like``: final norm and lm_head spread as verifier_text.spread_like_trained does
    (the verifier of the training-target checks); else final-norm weights 0.75 +- 0.5."""
    import torch
    import transformers as tf

    torch.manual_seed(0)
    if kind in ("qwen35", "qwen35_moe"):
        moe = kind == "qwen35_moe"
        config_class = tf.Qwen3_5MoeConfig if moe else tf.Qwen3_5Config
        model_class = (
            tf.Qwen3_5MoeForConditionalGeneration if moe else tf.Qwen3_5ForConditionalGeneration
        )
        config = config_class(text_config=_qwen35_text(moe), vision_config=_vision())
        final_norm = "model.language_model.norm"
    elif kind == "qwen3":
        config = tf.Qwen3Config(**_text_fields())
        model_class, final_norm = tf.Qwen3ForCausalLM, "model.norm"
    elif kind == "llama":
        config = tf.LlamaConfig(**_text_fields())
        model_class, final_norm = tf.LlamaForCausalLM, "model.norm"
    else:
        raise ValueError(kind)
    config._attn_implementation = "sdpa"
    model = model_class(config).eval()
    norm = model.get_submodule(final_norm)
    if trained_like:
        spread_like_trained(model, norm)
        return model
    with torch.no_grad():  # away from zero: x*w and x*(1+w) differ everywhere
        norm.weight.copy_(torch.randn(norm.weight.shape) * 0.5 + 0.75)
    return model


def final_norm(model: Any) -> Any:
    """The verifier's own final norm module (the oracle of the tests)."""
    inner = model.model
    return inner.language_model.norm if hasattr(inner, "language_model") else inner.norm


def write_checkpoint(folder: Path, kind: str, trained_like: bool = False) -> Path:
    """Save the tiny ``kind`` model (safetensors + config.json) with the tiny tokenizer."""
    model = build_model(kind, trained_like)
    model.save_pretrained(folder)
    demo.write_model(folder, "qwen36")
    return folder
