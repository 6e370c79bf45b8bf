"""Run on one speculators release: build, save and rotate with every drafter type it trains.

``python drafter_rotation.py IO.pt OUT VERIFIER... [-- TYPE FLAG...]``: IO.pt holds ``{"q":
[tokens, heads, head_dim], "positions": [tokens]}``. For each verifier folder and each drafter type
(tests/drafters.py: the release's own construction path; after ``--``, one type built with
those 0.8+ training flags), the drafter is saved with
``save_pretrained`` under OUT/<verifier name>/<type> (the fixes as the environment switches
them), and the query rotated the way it trains: its own ``rotary_emb`` on the positions, then the
``apply_rotary_pos_emb`` of the module defining its attention layer. Answers go to
OUT/trained.pt as ``{folder: {"q": rotated q (the error's text when the drafter cannot rotate),
"causal": per layer, whether upstream's block mask trains it causal (None: no blocks)}}``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import drafters
import torch


def trained_rotation(drafter: object, q: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    attention = drafter.layers[0].self_attn
    apply = sys.modules[type(attention).__module__].apply_rotary_pos_emb
    states = q.transpose(0, 1)[None].float()  # [1, heads, tokens, head_dim]
    with torch.no_grad():
        cos, sin = drafter.rotary_emb(states, positions[None, :])
        rotated, _ = apply(states, states.clone(), cos, sin)
    return rotated[0].transpose(0, 1)


def trained_causality(drafter: object) -> list[bool] | None:
    """Per draft layer, whether upstream's own block mask (``create_anchor_block_mask_mod``, as
    the drafter's forward builds it for that layer) keeps the first query of a block from the
    block's second token: causal within the block. None for drafters without blocks."""
    if not hasattr(drafter, "block_size") or not hasattr(drafter, "sliding_window_non_causal"):
        return None
    import inspect

    from speculators.models.dflash.attention import create_anchor_block_mask_mod

    first = next(iter(inspect.signature(create_anchor_block_mask_mod).parameters))
    spans = torch.tensor([8]) if first == "lengths" else torch.zeros(8, dtype=torch.long)
    layer_config = drafter.config.transformer_layer_config
    types = getattr(layer_config, "layer_types", None) or []
    causal = []
    for i in range(len(drafter.layers)):
        sliding = i < len(types) and types[i] == "sliding_attention"
        mask_mod, _, _ = create_anchor_block_mask_mod(
            spans, 8, torch.tensor([4]), 4,
            sliding_window=drafter.sliding_window if sliding else None,
            sliding_window_non_causal=drafter.sliding_window_non_causal,
        )  # fmt: skip
        zero = torch.tensor(0)
        sees_later = mask_mod(zero, zero, zero, torch.tensor(8 + 1))
        causal.append(not bool(sees_later))
    return causal


def main() -> None:
    io = torch.load(sys.argv[1])
    out = Path(sys.argv[2])
    answers: dict[str, object] = {}
    rest = sys.argv[3:]
    verifiers, flags = (
        (rest[: rest.index("--")], rest[rest.index("--") + 1 :]) if "--" in rest else (rest, [])
    )
    kinds = flags[:1] or drafters.drafter_types()
    for verifier in map(Path, verifiers):
        for kind in kinds:
            folder = out / verifier.name / kind
            drafter = drafters.build_drafter(verifier, kind, folder.with_suffix(".run"), *flags[1:])
            drafter.save_pretrained(folder)
            answer: dict[str, object] = {"causal": trained_causality(drafter)}
            try:
                answer["q"] = trained_rotation(drafter, io["q"], io["positions"])
            except Exception as exc:  # the release cannot rotate this head: say so
                answer["q"] = f"{type(exc).__name__}: {exc}"
            answers[str(folder)] = answer
    torch.save(answers, out / "trained.pt")


if __name__ == "__main__":
    main()
