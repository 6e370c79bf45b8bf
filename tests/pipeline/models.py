"""Tiny random target checkpoints for the pipeline tier, built with transformers' own classes.

Sizes are the smallest the vLLM 0.32 CPU kernels accept (docs/maintainers.md, "The whole pipeline
on CPU"): attention head_dim 32, Gated DeltaNet key/value head dims 128 in bf16, an mrope_section
that fits the rotary part of head_dim 32 at partial_rotary_factor 0.25. Eight layers, so
speculators' default EAGLE-3 layers are [2, 4, 5] and the last layer is 8. The norm weights are
drawn N(0, 0.5) so that a norm computing ``x*w`` and one computing ``x*(1+w)`` differ visibly. The
tokenizer and chat template are the bundled tiny Qwen3.6-style ones (demo/tiny-qwen36).
"""

from __future__ import annotations

from pathlib import Path

from verifier_text import spread_like_trained

from speculators_qwen_compat import demo

NUM_LAYERS = 8
HIDDEN = 128
VOCAB = 1216  # >= the tiny tokenizer's 1210 ids
KINDS = ("qwen3", "qwen3_5")


def _config(kind: str):  # -> a transformers config
    common = dict(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=256,
        num_hidden_layers=NUM_LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        eos_token_id=2,
        pad_token_id=0,
    )
    if kind == "qwen3":
        from transformers import Qwen3Config

        return Qwen3Config(**common, architectures=["Qwen3ForCausalLM"])
    from transformers import Qwen3_5MoeTextConfig, Qwen3_5TextConfig

    moe = kind == "qwen3_5_moe"
    if moe:
        common.update(
            num_experts=8,
            num_experts_per_tok=2,
            moe_intermediate_size=64,
            shared_expert_intermediate_size=64,
        )
    return (Qwen3_5MoeTextConfig if moe else Qwen3_5TextConfig)(
        **common,
        architectures=["Qwen3_5MoeForCausalLM" if moe else "Qwen3_5ForCausalLM"],
        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"]
        * (NUM_LAYERS // 4),
        linear_num_key_heads=1,
        linear_num_value_heads=2,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.25,
            "mrope_section": [2, 1, 1],
            "mrope_interleaved": True,
        },
    )


def build_target(kind: str, destination: Path, seed: int = 0, trained_like: bool = False) -> Path:
    """A ``kind`` checkpoint (bf16 safetensors, config, tokenizer, template) in ``destination``;
    ``kind`` is one of KINDS or "qwen3_5_moe" (the acceptance bench's DFlash verifier).
    ``trained_like``: the lm_head too is spread like a trained model's
    (verifier_text.spread_like_trained)."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(_config(kind), dtype=torch.float32)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.normal_(0.0, 0.5)
    if trained_like:
        spread_like_trained(model, model.model.norm, seed)
    model.to(torch.bfloat16).save_pretrained(destination)
    demo.write_model(destination, "qwen36")
    return destination
