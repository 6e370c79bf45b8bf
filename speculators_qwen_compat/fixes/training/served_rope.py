"""Fix: a drafter saved for a Qwen3.5/3.6 verifier loads in vLLM, rotating as it trained.

Why: the trainer copies M-RoPE fields the drafter never uses into its config, and vLLM refuses or
misrotates it (docs/upstream.md, "Serving a drafter in vLLM"). Target: ``save_pretrained``, with
the rope vLLM rotates as the drafter did. Retire when upstream or vLLM changes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from speculators_qwen_compat.core.fix import Fix, Patcher
from speculators_qwen_compat.core.targets import ReleaseRange, Resolved, Shape, Target
from speculators_qwen_compat.core.upstream import SPECULATOR_MODEL
from speculators_qwen_compat.fixes.training import stages
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
    applies_on = ReleaseRange("0.5.0", "0.9.0")

    def apply(self, found: Resolved, patcher: Patcher) -> None:
        def save_pretrained(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            with served_rope(instance):
                return wrapped(*args, **kwargs)

        stages.wrap(found, patcher, SAVE_PRETRAINED, self.name, save_pretrained)


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
    """{field: rope parameters to save} for each rope field vLLM would read otherwise than the
    model rotates: M-RoPE keys (vLLM's refusal), or a partial rotary factor the model's rotary
    embedding does not apply (0.6 keeps the verifier's 0.25; the drafter rotates every channel).
    The parameters saved are the first candidate under which plain RoPE, as vLLM builds it,
    equals the model's own rotation; {} when the saved ones already do, or none does."""
    fields: dict[str, dict[str, Any]] = {}
    for field in sd.ROPE_FIELDS:  # transformers 5: rope_scaling is rope_parameters' alias
        rope = getattr(layer, field, None)
        if isinstance(rope, dict) and not any(rope is seen for seen in fields.values()):
            fields[field] = rope
    if not fields:
        return {}
    kind = type(model).__name__
    rotary = getattr(model, "rotary_emb", None)
    head_dim = int(
        getattr(layer, "head_dim", None) or layer.hidden_size // layer.num_attention_heads
    )
    served: dict[str, dict[str, Any]] = {}
    for field, rope in fields.items():
        has_m_rope = any(k in rope for k in sd.M_ROPE_KEYS)
        if not has_m_rope and rotates_plainly(rotary, rope, head_dim):
            continue  # vLLM already rotates as the model does
        plain = sd.served_rope(rope)
        full = {k: v for k, v in plain.items() if k != "partial_rotary_factor"}
        chosen = next((c for c in (plain, full) if rotates_plainly(rotary, c, head_dim)), None)
        if chosen is None:
            if has_m_rope:
                log.warning(
                    "%s: its config has M-RoPE fields but its rotary embedding is not plain RoPE; "
                    "saved as upstream does (vLLM 0.32 refuses M-RoPE DFlash/PEAGLE drafters)",
                    kind,
                )
            continue
        served[field] = chosen
        dropped = sorted(k for k in rope if k not in chosen or chosen[k] != rope[k])
        log.warning(
            "%s: saved without %s in %s (the drafter rotates %s; vLLM would read them otherwise) "
            "(speculators_qwen_compat fix served_rope)",
            kind,
            ", ".join(f"{k}={rope[k]}" for k in dropped),
            field,
            "every channel, one position per token" if chosen is full else "one position per token",
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
