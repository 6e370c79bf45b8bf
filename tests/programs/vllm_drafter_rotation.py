"""Run by the vLLM venv's Python: how vLLM 0.32 reads saved drafter folders and rotates under them.

``python vllm_drafter_rotation.py IO.pt``: IO.pt holds ``{"folders": [...], "q": tensor
[tokens, heads, head_dim], "positions": tensor [tokens]}``. For each folder, vLLM's own config
reader (``get_config``, which runs its speculators reader) gives the draft config; the answer
records whether vLLM treats it as M-RoPE, its per-layer causality (qwen3_dflash's resolver for
DFlash-family drafters) and the query rotated by the rotary embedding its draft models build
(``get_rope(head_dim, max_position, is_neox_style=True, rope_parameters)``, as
``qwen3_dflash.py`` and ``llama_eagle3.py`` do). Written back to IO.pt under ``"answers"``
(``{"error": ...}`` for a folder vLLM cannot read); with ``"image": {"verifier", "tokens",
"offset", "grid"}`` also ``"image_positions"``, the M-RoPE positions vLLM computes for such a
prompt.
"""

from __future__ import annotations

import sys

import torch
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.model_executor.layers.rotary_embedding import get_rope
from vllm.transformers_utils.config import get_config, uses_mrope


def causality(config: object) -> list[bool] | None:
    from vllm.model_executor.models import qwen3_dflash

    if not getattr(config, "dflash_config", None) and "DSpark" not in str(
        getattr(config, "architectures", "")
    ):
        return None
    return [qwen3_dflash._dflash_layer_causal(config, i) for i in range(config.num_hidden_layers)]


def answer(folder: str, q: torch.Tensor, positions: torch.Tensor) -> dict:
    try:
        config = get_config(folder, trust_remote_code=False)
    except ValueError as exc:  # a speculators type vLLM has no reader for (XPress)
        return {"error": f"{type(exc).__name__}: {exc}"}
    out: dict = {"uses_mrope": bool(uses_mrope(config)), "causal": causality(config)}
    rope_parameters = dict(getattr(config, "rope_parameters", None) or {})
    out["rope_parameters"] = rope_parameters
    if out["uses_mrope"]:
        return out
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    rope = get_rope(
        head_dim,
        max_position=config.max_position_embeddings,
        is_neox_style=True,
        rope_parameters=rope_parameters,
        dtype=torch.float32,
    )
    tokens, heads, _ = q.shape
    flat = q.reshape(tokens, heads * head_dim).clone()
    rotated, _ = rope.forward_native(positions, flat, flat.clone())
    out["q_rotated"] = rotated.reshape(tokens, heads, head_dim)
    return out


def image_positions(verifier: str, tokens: int, offset: int, grid: list[int]) -> torch.Tensor:
    """The M-RoPE positions vLLM gives a Qwen3.5/3.6 verifier's prompt of ``tokens`` tokens with
    one image of ``grid`` (t, h, w patches) whose placeholder starts at ``offset`` (its own
    ``_get_mrope_input_positions``); a drafter without M-RoPE gets row 0 of them
    (``llm_base_proposer._set_positions``; DFlash's input kernel reads the same row)."""
    from types import SimpleNamespace

    from vllm.model_executor.models.qwen3_vl import Qwen3VLForConditionalGeneration

    config = get_config(verifier, trust_remote_code=False)
    merge = config.vision_config.spatial_merge_size
    count = grid[0] * (grid[1] // merge) * (grid[2] // merge)
    feature = SimpleNamespace(
        modality="image",
        mm_position=SimpleNamespace(offset=offset, length=count),
        data={"image_grid_thw": SimpleNamespace(data=torch.tensor(grid))},
    )
    ids = [0] * tokens
    positions, _ = Qwen3VLForConditionalGeneration._get_mrope_input_positions(
        ids, [feature], config
    )
    return positions


def main() -> None:
    path = sys.argv[1]
    io = torch.load(path)
    with set_current_vllm_config(VllmConfig()):  # vLLM's layers are built inside one
        io["answers"] = [answer(f, io["q"], io["positions"]) for f in io["folders"]]
        if "image" in io:
            io["image_positions"] = image_positions(**io["image"])
    torch.save(io, path)


if __name__ == "__main__":
    main()
