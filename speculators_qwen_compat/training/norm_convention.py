"""Which final-norm convention a verifier uses, and a frozen RMS norm that computes ``x*(1+w)``.

Shared by the verifier-norm fix and ``doctor``. Llama/Qwen3 normalise ``x*w``; Gemma, Qwen3-Next
and Qwen3.5/3.6 ``x*(1+w)`` (docs/upstream.md, "Training"); the effective model type
(``text_config``'s for a composite config) decides.
"""

from __future__ import annotations

import copy
import functools
import logging
from typing import Any

log = logging.getLogger("speculators_qwen_compat")

#: Model types whose final norm computes ``x / rms(x) * (1 + w)``: top-level and text types.
ONE_PLUS_WEIGHT_MODEL_TYPES = frozenset(
    {
        "qwen3_5",
        "qwen3_5_text",
        "qwen3_5_moe",
        "qwen3_5_moe_text",
        "qwen3_next",
        "gemma",
        "gemma2",
        "gemma3",
        "gemma3_text",
        "recurrent_gemma",
        "vaultgemma",
    }
)

ONE_PLUS_WEIGHT = "x/rms(x)*(1+w)"
TIMES_WEIGHT = "x/rms(x)*w"


@functools.cache
def verifier_model_types(name_or_path: str) -> tuple[str, ...] | None:
    """(effective type, top-level type) of a verifier from its config, None if unreadable.

    Reads the config the way upstream does (AutoConfig, no remote code)."""
    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(name_or_path)
    except Exception as exc:  # a missing or unreachable config: the caller decides
        log.info("cannot read the config of verifier %s: %s", name_or_path, exc)
        return None
    top = str(getattr(config, "model_type", "") or "")
    text = getattr(config, "text_config", None)
    effective = str(getattr(text, "model_type", "") or "") if text is not None else ""
    return (effective or top, top)


@functools.cache
def _architecture_types() -> dict[str, str]:
    """transformers' model class name -> model type, from its own auto mappings."""
    from transformers.models.auto import modeling_auto

    out: dict[str, str] = {}
    for name in dir(modeling_auto):
        mapping = getattr(modeling_auto, name)
        if not name.endswith("_MAPPING_NAMES") or not isinstance(mapping, dict):
            continue
        for model_type, classes in mapping.items():
            for cls in classes if isinstance(classes, (list, tuple)) else (classes,):
                if isinstance(cls, str):
                    out.setdefault(cls, model_type)
    return out


def architecture_types(architectures: list[str] | None) -> tuple[str, ...]:
    """Model types of the architectures a drafter config records for its verifier."""
    table = _architecture_types()
    return tuple(table[a] for a in architectures or () if a in table)


def uses_one_plus_weight(model_types: tuple[str, ...]) -> bool:
    return any(t in ONE_PLUS_WEIGHT_MODEL_TYPES for t in model_types)


def convention_of(module: Any) -> str | None:
    """What a norm module computes, found by running a copy of it on a probe input:
    ONE_PLUS_WEIGHT, TIMES_WEIGHT, or None for anything else (works on meta tensors too)."""
    import torch

    weight = getattr(module, "weight", None)
    if weight is None or weight.dim() != 1:
        return None
    probe = copy.deepcopy(module)
    probe = probe.to_empty(device="cpu").float() if weight.is_meta else probe.cpu().float()
    size = weight.shape[0]
    gen = torch.Generator(device="cpu").manual_seed(0)
    # device and dtype given explicitly: from_pretrained builds models under a meta-device
    # context with the checkpoint's dtype (bf16) as torch's default dtype
    x = torch.randn(2, size, generator=gen, device="cpu", dtype=torch.float32)
    w = torch.randn(size, generator=gen, device="cpu", dtype=torch.float32) * 0.5
    with torch.no_grad():
        probe.weight.copy_(w)
        try:
            y = probe(x)
        except Exception:
            return None
    unit = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    if torch.allclose(y, unit * (1 + w), atol=1e-3, rtol=1e-3):
        return ONE_PLUS_WEIGHT
    if torch.allclose(y, unit * w, atol=1e-3, rtol=1e-3):
        return TIMES_WEIGHT
    return None


def one_plus_weight_rms_norm(size: int, eps: float, dtype: Any, device: Any) -> Any:
    """A new ``OnePlusWeightRMSNorm`` (built lazily: torch is imported only when needed)."""
    return _norm_class()(size, eps=eps, dtype=dtype, device=device)


@functools.cache
def _norm_class() -> type:
    import torch

    class OnePlusWeightRMSNorm(torch.nn.Module):
        """``x / rms(x) * (1 + w)``, computed in float32 and returned in the input's dtype,
        as transformers' Qwen3.5/Gemma norms do. The weight starts at zero (identity gain). It is
        frozen: no gradient reaches it even where a loader turns ``requires_grad`` back on
        (0.5.0's ``from_pretrained`` does not re-freeze verifier weights)."""

        def __init__(self, size: int, eps: float, dtype: Any = None, device: Any = None) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(size, dtype=dtype, device=device))
            self.eps = eps

        def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
            x = hidden_states.float()
            x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
            return (x * (1.0 + self.weight.detach().float())).type_as(hidden_states)

        def extra_repr(self) -> str:
            return f"{self.weight.shape[0]}, eps={self.eps}, gain=1+w"

    return OnePlusWeightRMSNorm


def norm_eps(module: Any) -> float | None:
    """The eps of an RMS norm module, whatever transformers calls it."""
    for name in ("variance_epsilon", "eps", "epsilon"):
        value = getattr(module, name, None)
        if isinstance(value, (int, float)):
            return float(value)
    return None
