"""How vLLM 0.32 will read a drafter folder speculators saved, beside how it trained.

Shared by the served_rope and served_attention fixes and ``doctor --drafter``: the rope without
the M-RoPE fields the drafter never used, the layers vLLM serves causal (docs/upstream.md,
"Serving a drafter in vLLM"). Reads the drafter's config as its ``config.json`` dict.
"""

from __future__ import annotations

from typing import Any

#: Rope fields that make vLLM treat a config as M-RoPE (``xdrope_section``: HunYuan's name).
M_ROPE_KEYS = ("mrope_section", "xdrope_section", "mrope_interleaved")
ROPE_FIELDS = ("rope_parameters", "rope_scaling")
SLIDING = "sliding_attention"
#: speculators types vLLM 0.32 serves as block (parallel) drafters, and how it reads causality.
ONE_FLAG = ("dflash", "dflash2")
PER_LAYER = ("dspark",)
BLOCK_DRAFTERS = ONE_FLAG + PER_LAYER + ("xpress",)
#: Releases whose trainer saves the verifier's ``partial_rotary_factor`` (0.25 for Qwen3.5/3.6)
#: while their drafters rotate every channel of a head (the git-only 0.6 ``scripts/train.py``;
#: the served_rope fix finds it by running the drafter's rotary embedding).
UNAPPLIED_PARTIAL_FACTOR = ("0.6.0", "0.6.0.1", "0.6.0.2")


def layer_config(config: dict[str, Any]) -> dict[str, Any]:
    return config.get("transformer_layer_config") or {}


def m_rope_fields(config: dict[str, Any]) -> dict[str, Any]:
    """The M-RoPE fields of the drafter's rope parameters (empty: vLLM reads plain RoPE)."""
    layer = layer_config(config)
    found: dict[str, Any] = {}
    for field in ROPE_FIELDS:
        rope = layer.get(field)
        if isinstance(rope, dict):
            found.update({k: rope[k] for k in M_ROPE_KEYS if k in rope})
    return found


def served_rope(rope: dict[str, Any]) -> dict[str, Any]:
    """``rope`` without its M-RoPE fields, and without a ``partial_rotary_factor`` of 1.0 (the
    default on both sides; speculators keeps it only beside ``mrope_section``)."""
    out = {k: v for k, v in rope.items() if k not in M_ROPE_KEYS}
    if float(out.get("partial_rotary_factor", 1.0)) == 1.0:
        out.pop("partial_rotary_factor", None)
    return out


def serving_config(config: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A copy of a saved drafter's config.json that vLLM 0.32 serves as the drafter trained,
    read from the config alone (no model built), and what changed; ValueError when no config
    can (block layers trained causal beside bidirectional ones)."""
    import copy

    out = copy.deepcopy(config)
    changes: list[str] = []
    layer = out.get("transformer_layer_config") or {}
    unapplied = str(config.get("speculators_version")) in UNAPPLIED_PARTIAL_FACTOR
    for field in ROPE_FIELDS:
        rope = layer.get(field)
        if not isinstance(rope, dict):
            continue
        served = served_rope(rope)
        if unapplied:
            served.pop("partial_rotary_factor", None)
        dropped = sorted(k for k in rope if k not in served)
        if dropped:
            layer[field] = served
            changes.append(f"{field}: without {', '.join(f'{k}={rope[k]}' for k in dropped)}")
    fields = attention_for_serving(config)
    if fields is None:
        raise ValueError(attention_mismatch(config))
    for key, value in fields.items():
        out[key] = value
        changes.append(f"{key}: {json_word(value)} (every layer trained bidirectional)")
    return out, changes


def json_word(value: Any) -> str:
    """A config value as config.json spells it (``true``, not ``True``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def rotary_dim(rope: dict[str, Any], head_dim: int) -> int:
    """How many channels of a head vLLM's ``get_rope`` rotates under ``rope``."""
    return int(rope.get("rope_dim") or head_dim * float(rope.get("partial_rotary_factor", 1.0)))


def head_dim_of(config: dict[str, Any]) -> int:
    layer = layer_config(config)
    return int(layer.get("head_dim") or layer["hidden_size"] // layer["num_attention_heads"])


def speculator_type(config: dict[str, Any]) -> str:
    return str(config.get("speculators_model_type") or "")


def layer_types(config: dict[str, Any]) -> list[str]:
    """Each draft layer's type; a config without ``layer_types`` has full-attention layers
    (speculators <= 0.6 wrote none unless ``--sliding-window-indices`` was given)."""
    layer = layer_config(config)
    count = int(layer.get("num_hidden_layers") or 0)
    types = layer.get("layer_types")
    return list(types) if types else ["full_attention"] * count


def trained_causal(config: dict[str, Any]) -> list[bool] | None:
    """Per draft layer, whether speculators trained it causal within the block; None for a
    drafter that is not a block drafter or a release that records no causality."""
    if speculator_type(config) not in BLOCK_DRAFTERS or "sliding_window_non_causal" not in config:
        return None
    non_causal = bool(config["sliding_window_non_causal"])
    return [t == SLIDING and not non_causal for t in layer_types(config)]


def served_causal(config: dict[str, Any]) -> list[bool] | None:
    """Per draft layer, whether vLLM 0.32 serves it causal; None where vLLM has no such model."""
    kind = speculator_type(config)
    if kind in ONE_FLAG:
        causal = not config.get("sliding_window_non_causal", True)
        return [causal] * len(layer_types(config))
    if kind in PER_LAYER:
        return [t == SLIDING for t in layer_types(config)]
    return None


def attention_for_serving(config: dict[str, Any]) -> dict[str, Any] | None:
    """Fields to save so that vLLM serves every layer as it was trained: ``{}`` when it already
    does (or nothing can be said), ``{"sliding_window_non_causal": True}`` for a DFlash/DFlash2
    drafter trained bidirectional on every layer (all full attention: the flag changes nothing in
    training, and turns vLLM's one flag to non-causal), None when no saved config can (layers
    trained causal beside layers trained bidirectional)."""
    trained, served = trained_causal(config), served_causal(config)
    if trained is None or served is None or trained == served:
        return {}
    if speculator_type(config) in ONE_FLAG and not any(trained):
        return {"sliding_window_non_causal": True}
    return None


def attention_mismatch(config: dict[str, Any]) -> str:
    """One line saying which layers vLLM would serve otherwise than they trained, and the
    training flags that fit ("" if none)."""
    trained, served = trained_causal(config), served_causal(config)
    if trained is None or served is None or attention_for_serving(config) is not None:
        return ""
    word = {True: "causal", False: "bidirectional"}
    layers = [i for i, (t, s) in enumerate(zip(trained, served, strict=True)) if t != s]
    advice = (
        "train with --sliding-window-non-causal (every layer bidirectional) or without "
        "--full-attention-indices (every layer sliding and causal)"
        if speculator_type(config) in ONE_FLAG
        else "train without --sliding-window-non-causal (vLLM serves sliding layers causal)"
    )
    return (
        f"draft layer(s) {', '.join(map(str, layers))} train "
        f"{word[trained[layers[0]]]} within the block but vLLM 0.32 serves this "
        f"{speculator_type(config)} drafter's layers {word[served[layers[0]]]}, so it would "
        f"draft as another model; {advice}"
    )
