"""The tokenizer vLLM 0.32 builds for a checkpoint, for local rendering on every release.

Why: vLLM 0.32's transformers builds ``Qwen3_5Tokenizer`` for every Qwen3.5/3.6 model type while
0.8.1's pin follows tokenizer_config.json, and some words tokenize differently (docs/upstream.md,
"Local rendering"). ``for_rendering`` gives that class, loaded once per tokenizer.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger("speculators_qwen_compat")

#: model_type -> the tokenizer class transformers 5.19 (vLLM 0.32's) builds for it regardless
#: of tokenizer_config.json.
VLLM_CLASSES = {
    "qwen3_5": "Qwen3_5Tokenizer",
    "qwen3_5_moe": "Qwen3_5Tokenizer",
    "qwen3_5_text": "Qwen3_5Tokenizer",
    "qwen3_5_moe_text": "Qwen3_5Tokenizer",
}

#: id(tokenizer) -> (tokenizer, the one to encode with); the first keeps the id from reuse.
_vllm_tokenizers: dict[int, tuple[Any, Any]] = {}


def for_rendering(tokenizer: Any) -> Any:
    """The tokenizer that encodes as vLLM 0.32 does for this tokenizer's checkpoint."""
    found = _vllm_tokenizers.get(id(tokenizer))
    if found is None:
        found = _vllm_tokenizers[id(tokenizer)] = (tokenizer, _vllm_class_tokenizer(tokenizer))
    return found[1]


def _vllm_class_tokenizer(tokenizer: Any) -> Any:
    path = str(getattr(tokenizer, "name_or_path", "") or "")
    wanted = VLLM_CLASSES.get(model_type(path) or "")
    if wanted is None or type(tokenizer).__name__ == wanted:
        return tokenizer
    import transformers

    cls = getattr(transformers, wanted, None)
    if cls is None:  # a transformers without the class: nothing closer to build
        return tokenizer
    built = cls.from_pretrained(path)
    log.info(
        "rendering locally with %s, the tokenizer vLLM builds for this checkpoint "
        "(transformers loaded %s)", wanted, type(tokenizer).__name__,
    )  # fmt: skip
    return built


def model_type(path: str) -> str | None:
    """``model_type`` of the checkpoint's config.json, or None."""
    found = checkpoint_config(path).get("model_type")
    return found if isinstance(found, str) else None


def checkpoint_config(path: str) -> dict[str, Any]:
    """The checkpoint's config.json (a local folder or the Hub cache); {} when it has none (a
    tokenizer-only folder)."""
    if not path:
        return {}
    config = Path(path) / "config.json"
    try:
        if config.is_file():
            found = json.loads(config.read_text(encoding="utf-8"))
        else:
            from transformers import PretrainedConfig

            found = PretrainedConfig.get_config_dict(path)[0]
    except Exception:
        return {}
    return found if isinstance(found, dict) else {}
