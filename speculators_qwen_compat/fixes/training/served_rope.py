"""Fix: a drafter saved for a Qwen3.5/3.6 verifier loads in vLLM, rotating as it trained.

Target: ``speculators.model.SpeculatorModel.save_pretrained`` (transformers' own, inherited by
every drafter; the trainer's checkpointer and ``--dry-run`` save through it), 0.5.0-0.9.0.

Why: the trainer copies the verifier's rope parameters into the drafter's
``transformer_layer_config`` and keeps ``mrope_section`` (0.7+: rescaled to the drafter's full
head, ``[8, 4, 4]`` for head_dim 32; ``train/cli.py``, the git-only ``scripts/train.py`` in 0.7).
The drafter never uses it: its rotary embedding (transformers' Llama/Qwen3 class) rotates one
position per token. vLLM 0.32 treats any config with ``mrope_section`` as M-RoPE and refuses
DFlash, DFlash2, DSpark and PEAGLE drafters whose config has it ("Speculative Decoding with draft
models or parallel drafting does not support M-RoPE yet"); EAGLE-3 loads but rotates by M-RoPE.

What it does: when the drafter's rope parameters hold M-RoPE fields and its own rotary embedding,
run on positions 0..N, computes plain RoPE under the parameters without them (the rotation vLLM
applies to such a config), the config is saved without them (and without a partial rotary factor
of 1.0); the model in memory keeps its config. Anything else is saved as upstream does, with one
warning. Retire when speculators stops writing M-RoPE fields into drafter configs, or vLLM serves
M-RoPE drafters.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from speculators_qwen_compat.core.fix import Fix, Patcher
from speculators_qwen_compat.core.targets import Found, Shape, Span, Target
from speculators_qwen_compat.core.upstream import SPECULATOR_MODEL
from speculators_qwen_compat.training import served_drafter as sd

log = logging.getLogger("speculators_qwen_compat")

SAVE_PRETRAINED = Target(SPECULATOR_MODEL, "SpeculatorModel.save_pretrained")
PROBE_POSITIONS = 4096


class ServedRopeFix(Fix):
    name = "served_rope"
    summary = "a drafter's config is saved without the M-RoPE fields its rotation never used"
    modules = (SPECULATOR_MODEL,)
    shapes = (
        Shape(
            "drafters saved with the verifier's mrope_section lose it when they rotate plainly",
            (SAVE_PRETRAINED,),
        ),
    )
    applies_on = Span("0.5.0", "0.9.0")

    def apply(self, found: Found, patcher: Patcher) -> None:
        def save_pretrained(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            with served_rope(instance):
                return wrapped(*args, **kwargs)

        patcher.wrap(*found.place(SAVE_PRETRAINED), save_pretrained)


@contextmanager
def served_rope(model: Any) -> Iterator[None]:
    """Within the block, ``model``'s layer config holds the rope parameters vLLM should read."""
    layer = getattr(getattr(model, "config", None), "transformer_layer_config", None)
    changed: dict[str, Any] = {}
    try:
        changed = _plain_rope_fields(model, layer)
    except Exception as exc:  # never break a save
        log.warning("served_rope fix skipped for %s: %s", type(model).__name__, exc)
    for field, served in changed.items():
        changed[field] = getattr(layer, field)
        setattr(layer, field, served)
    try:
        yield
    finally:
        for field, original in changed.items():
            setattr(layer, field, original)


def _plain_rope_fields(model: Any, layer: Any) -> dict[str, dict[str, Any]]:
    """{field: rope parameters to save} for each rope field holding M-RoPE keys, when the
    model's rotation is plain RoPE under them; {} otherwise."""
    fields = {
        f: getattr(layer, f)
        for f in sd.ROPE_FIELDS
        if isinstance(getattr(layer, f, None), dict)
        and any(k in getattr(layer, f) for k in sd.M_ROPE_KEYS)
    }
    if not fields:
        return {}
    kind = type(model).__name__
    served = {f: sd.served_rope(rope) for f, rope in fields.items()}
    head_dim = int(
        getattr(layer, "head_dim", None) or layer.hidden_size // layer.num_attention_heads
    )
    rope = next(iter(served.values()))
    if not rotates_plainly(getattr(model, "rotary_emb", None), rope, head_dim):
        log.warning(
            "%s: its config has M-RoPE fields (%s) but its rotary embedding is not plain RoPE; "
            "saved as upstream does (vLLM 0.32 refuses M-RoPE DFlash/PEAGLE drafters)",
            kind,
            ", ".join(sorted({k for r in fields.values() for k in r if k in sd.M_ROPE_KEYS})),
        )
        return {}
    log.warning(
        "%s: saved without %s (the drafter rotates one position per token; vLLM refuses "
        "M-RoPE drafters) (speculators_qwen_compat fix served_rope)",
        kind,
        ", ".join(sorted({k for r in fields.values() for k in r if k in sd.M_ROPE_KEYS})),
    )
    return served


def plain_cos_sin(rope: dict[str, Any], head_dim: int, positions: Any) -> tuple[Any, Any]:
    """cos and sin of 1-D RoPE as vLLM's ``get_rope`` builds it for ``rope`` (neox layout:
    the frequencies twice over the rotated channels)."""
    import torch

    dim = sd.rotary_dim(rope, head_dim)
    theta = float(rope.get("rope_theta", 10000.0))
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    freqs = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotates_plainly(rotary: Any, rope: dict[str, Any], head_dim: int) -> bool:
    """Whether the drafter's rotary embedding module gives plain RoPE's cos/sin under ``rope``
    on positions 0..PROBE_POSITIONS (run on a float32 copy, whatever device it lives on)."""
    import copy

    import torch

    if rotary is None or rope.get("rope_type", "default") != "default":
        return False
    probe = copy.deepcopy(rotary).to("cpu").float()
    positions = torch.arange(PROBE_POSITIONS)
    x = torch.zeros(1, PROBE_POSITIONS, head_dim, dtype=torch.float32)
    with torch.no_grad():
        cos, sin = probe(x, positions[None, :])
    want_cos, want_sin = plain_cos_sin(rope, head_dim, positions)
    if cos.shape[-1] != want_cos.shape[-1]:
        return False
    return bool(
        torch.allclose(cos[0].double(), want_cos, atol=2e-3)
        and torch.allclose(sin[0].double(), want_sin, atol=2e-3)
    )
