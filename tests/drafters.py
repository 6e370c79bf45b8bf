"""Build drafters the way the installed release's own training code does (test helper).

0.8+: ``speculators.train.cli.build_draft_model`` from a command line parsed by the release's
own ``TrainConfig`` (the path ``python -m speculators.train`` takes). <= 0.7: the trainer is the
git-only ``scripts/train.py``, which derives a ``LlamaConfig`` (EAGLE-3 family) or
``Qwen3Config`` (DFlash family) from the verifier's text config and calls the registered model
class's ``from_training_args``; the same model classes are called here with that recipe, the
rope parameters carried over as each script does (``script_rope``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

TARGET_LAYERS = ("1", "2", "3")


def drafter_types() -> list[str]:
    """Registered speculator types whose drafters hold a frozen verifier_norm: not mtp, nor
    0.5.0's DFlash (it has no verifier norm; building it without a vocab mapping raises)."""
    from importlib.metadata import version

    import speculators.models  # noqa: F401 (registers every type)
    from packaging.version import Version
    from speculators.model import SpeculatorModel

    without = {"mtp"} | ({"dflash"} if Version(version("speculators")) < Version("0.6") else set())
    return sorted(t for t in SpeculatorModel.registry if t not in without)


def uses_cli() -> bool:
    try:
        from speculators.train.cli import build_draft_model  # noqa: F401
    except ImportError:
        return False
    return True


def build_drafter(verifier: Path, speculator_type: str, save_path: Path, *extra: str) -> Any:
    """``extra``: more of 0.8+'s training flags (not read by the <= 0.7 recipe)."""
    if uses_cli():
        return _build_with_cli(verifier, speculator_type, save_path, *extra)
    return _build_like_script(verifier, speculator_type)


def cli_args(verifier: Path, speculator_type: str, save_path: Path, *extra: str) -> Any:
    """The namespace 0.8+'s ``speculators.train`` builds from its command line."""
    from speculators.train.config import TrainConfig

    argv = [
        "--speculator-type", speculator_type, "--verifier-name-or-path", str(verifier),
        "--mask-token-id", "5", "--draft-attn-impl", "sdpa",
        "--target-layer-ids", *TARGET_LAYERS, "--save-path", str(save_path), *extra,
    ]  # fmt: skip
    return argparse.Namespace(**TrainConfig.resolve(argv).flatten())


def _build_with_cli(verifier: Path, speculator_type: str, save_path: Path, *extra: str) -> Any:
    from speculators.model import SpeculatorModel
    from speculators.train.cli import build_draft_model, parse_vocab_mappings

    args = cli_args(verifier, speculator_type, save_path, *extra)
    d2t, t2d, vocab = parse_vocab_mappings(args)
    return build_draft_model(args, SpeculatorModel.registry[speculator_type], t2d, d2t, vocab)


def script_rope(text: Any) -> dict[str, Any] | None:
    """The drafter's rope parameters as the git-only ``scripts/train.py`` derives them (read at
    tags v0.6.0 and v0.7.0): 0.5 copies none (the decoder config's defaults); 0.6 copies the
    verifier's and drops the M-RoPE keys (keeping ``partial_rotary_factor``); 0.7 rescales
    ``mrope_section`` to the full head (``partial_rotary_factor`` 1.0) and keeps it, as 0.8+'s
    ``train/cli.py`` does."""
    from importlib.metadata import version

    from packaging.version import Version

    release = Version(version("speculators"))
    rope = dict(getattr(text, "rope_parameters", None) or {})
    if release < Version("0.6") or not rope:
        return None
    rope.pop("type", None)
    rope.pop("mrope_interleaved", None)
    if release < Version("0.7"):
        rope.pop("mrope_section", None)
        return rope
    partial = float(rope.get("partial_rotary_factor", 1.0))
    if "mrope_section" in rope and partial < 1.0:
        rope["mrope_section"] = [int(x) * round(1 / partial) for x in rope["mrope_section"]]
        rope["partial_rotary_factor"] = 1.0
    if "mrope_section" not in rope:
        rope.pop("partial_rotary_factor", None)
    return rope


def _build_like_script(verifier: Path, speculator_type: str) -> Any:
    from speculators.model import SpeculatorModel
    from transformers import AutoConfig, LlamaConfig, Qwen3Config

    text = AutoConfig.from_pretrained(verifier)
    text = getattr(text, "text_config", text)
    eagle_family = speculator_type in ("eagle3", "peagle")
    layer_config = (LlamaConfig if eagle_family else Qwen3Config)(
        vocab_size=text.vocab_size,
        hidden_size=text.hidden_size,
        intermediate_size=text.intermediate_size,
        num_hidden_layers=1 if eagle_family else 2,
        num_attention_heads=text.num_attention_heads,
        num_key_value_heads=text.num_key_value_heads,
        hidden_act="silu",
        max_position_embeddings=text.max_position_embeddings,
        rms_norm_eps=text.rms_norm_eps,
        head_dim=text.head_dim,
    )
    rope = script_rope(text)
    if rope is not None:
        layer_config.rope_parameters = rope
    layer_config._attn_implementation = "sdpa"
    return SpeculatorModel.registry[speculator_type].from_training_args(
        verifier_config=layer_config,
        t2d=None,
        d2t=None,
        verifier_name_or_path=str(verifier),
        draft_vocab_size=text.vocab_size,
        target_layer_ids=[int(i) for i in TARGET_LAYERS],
        norm_before_residual=False,
        ttt_steps=3,
        mask_token_id=5,
        block_size=4,
        max_anchors=16,
    )


def offline_data(out: Path, hidden: int, rows: int = 8, tokens: int = 48) -> Path:
    """``rows`` rows in speculators' offline layout (0.8+ ``train/data.py``): input ids, a loss
    mask past the first 8 tokens, and random hidden states of TARGET_LAYERS and the last layer
    ([tokens, 4, hidden]) in ``hidden_states/hs_{i}.safetensors``. For runs that check what is
    saved and said, not what is learned."""
    import torch
    from datasets import Dataset
    from safetensors.torch import save_file

    (out / "hidden_states").mkdir(parents=True)
    gen = torch.Generator().manual_seed(0)
    records = []
    for i in range(rows):
        ids = torch.randint(3, 1200, (tokens,), generator=gen)
        states = torch.randn(tokens, len(TARGET_LAYERS) + 1, hidden, generator=gen)
        save_file({"hidden_states": states, "token_ids": ids},
                  str(out / "hidden_states" / f"hs_{i}.safetensors"))  # fmt: skip
        mask = [0] * 8 + [1] * (tokens - 8)
        records.append({"input_ids": ids.tolist(), "loss_mask": mask, "seq_len": tokens})
    Dataset.from_list(records).with_format("torch").save_to_disk(str(out))
    return out
