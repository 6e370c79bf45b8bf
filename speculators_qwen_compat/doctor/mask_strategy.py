"""How the installed speculators release masks a conversation, for ``doctor``: the kind, decided as
the release decides it (its assistant-mask probe through the run's mask_probe stage, its pattern),
and the rows one sampled row gives: upstream's batch function on it alone with every stage of the
run (route/), so doctor's rows, skips and reasons are the run's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

from speculators_qwen_compat.core.errors import CompatError, reason_of
from speculators_qwen_compat.core.fix import FixState
from speculators_qwen_compat.core.upstream import parameters
from speculators_qwen_compat.data.normalize.batch import RENDER
from speculators_qwen_compat.data.normalize.processor_media import is_multimodal
from speculators_qwen_compat.data.read.files import LINE_COLUMN, SOURCE_COLUMN
from speculators_qwen_compat.data.render.endpoint import local_endpoint
from speculators_qwen_compat.route.declaration import generation

HF_MASK = "hf-assistant-mask"
PATTERN = "pattern"
RENDER_BOUNDARY = "render-boundary"


@dataclass
class Row:
    input_ids: list[int]
    loss_mask: list[int]


@dataclass
class MaskStrategy:
    kind: str
    preprocessing: ModuleType
    tokenizer: Any
    pattern: str | None = None

    def describe(self) -> list[str]:
        """Lines telling how masks are made and which text is supervised."""
        if self.kind == HF_MASK:
            return [
                "HF assistant mask: the template's {% generation %} tags make the (fixed) "
                "probe return True;",
                "one row per conversation, the text inside the generation tags supervised",
            ]
        if self.kind == PATTERN:
            return [
                "regex pattern fallback (no HF assistant mask); one row per conversation,",
                "group 1 of this pattern supervised, from upstream's _detect_assistant_pattern:",
                pattern_literal(self.pattern or ""),
            ]
        return [
            "render boundary: one row per assistant turn; the context is masked, the turn is",
            "supervised from the end of its generation prompt to the end of the turn; rendered",
            "in-process with the target's tokenizer (--render-endpoint local, our default) or",
            "by the vLLM server given as --render-endpoint URL (token-identical, images included)",
        ]

    def rows(self, line: str, source: str, processor: Any, max_length: int) -> list[Row]:
        """The rows the run writes for one sampled row (its JSON text, read from ``source``):
        upstream's ``_preprocess_batch`` on it alone, through the run's stages (read, guarded,
        rendered or masked, counted in the open batch), with ``processor`` as the run loads it."""
        batch = self.preprocessing._preprocess_batch
        names = parameters(batch)
        given: dict[str, Any] = {
            "examples": {LINE_COLUMN: [line], SOURCE_COLUMN: [source]},
            "max_length": max_length,
        }
        if self.kind == RENDER_BOUNDARY:  # as build_speculator_training_dataset calls it
            given["is_multimodal"] = is_multimodal(processor)
            given["render_endpoint"] = local_endpoint(processor)
        else:  # as build_eagle3_dataset calls it
            given["tokenizer" if "tokenizer" in names else "processor"] = processor
            given["assistant_pattern"] = self.pattern  # None: the HF assistant mask
            if "turn_dropout" in names:
                given["turn_dropout"] = False
        return _rows(batch(**given))


def _rows(out: Any) -> list[Row]:
    """The rows of upstream's batch output (a dict of tensors, or the Arrow table the
    messages_json stage hands datasets)."""
    if hasattr(out, "column_names"):  # a pyarrow Table
        out = {name: out.column(name).to_pylist() for name in ("input_ids", "loss_mask")}
    ids, masks = out.get("input_ids", []), out.get("loss_mask", [])
    return [Row(_ints(i), _ints(m)) for i, m in zip(ids, masks, strict=True)]


def _ints(values: Any) -> list[int]:
    return [int(v) for v in (values.tolist() if hasattr(values, "tolist") else values)]


def pattern_literal(pattern: str) -> str:
    """The pattern on one line: re.escape leaves newlines raw, ``\\n`` matches the same."""
    return pattern.replace("\\\n", "\\n").replace("\n", "\\n")


def detect_strategy(preprocessing: ModuleType, tokenizer: Any) -> MaskStrategy:
    """The strategy the release will use for this tokenizer's template, decided as its dataset
    builder decides it."""
    if generation(preprocessing).GENERATION == RENDER:  # the route the run takes (route/)
        _require_local_render()
        return MaskStrategy(RENDER_BOUNDARY, preprocessing, tokenizer)
    detect = getattr(preprocessing, "_detect_assistant_pattern", None)
    if not callable(detect):
        raise CompatError(
            "this speculators release has neither render_conversation nor "
            "_detect_assistant_pattern: doctor does not know how it masks"
        )
    probe = getattr(preprocessing, "_supports_assistant_mask", None)
    try:  # the release's probe, through the run's mask_probe stage
        hf_mask = callable(probe) and probe(tokenizer)
    except Exception as exc:
        raise CompatError(
            f"upstream's _supports_assistant_mask fails on this template ({reason_of(exc)}), "
            "so prepare_data would stop; switch the mask_probe fix on"
        ) from exc
    if hf_mask:
        return MaskStrategy(HF_MASK, preprocessing, tokenizer)
    try:
        pattern = detect(tokenizer)
    except Exception as exc:
        raise CompatError(
            f"upstream's _detect_assistant_pattern fails on this template ({reason_of(exc)}), "
            "so prepare_data would stop; pass --assistant-pattern REGEX to prepare_data"
        ) from exc
    return MaskStrategy(PATTERN, preprocessing, tokenizer, pattern=str(pattern))


def _require_local_render() -> None:
    from speculators_qwen_compat import status

    states = {s.name: s for s in status(resolve=False)}
    state = states.get("local_render")
    if state is None or state.state != FixState.APPLIED:
        how = f"{state.state}: {state.reason}" if state else "not installed"
        raise CompatError(
            f"doctor renders 0.8+ conversations in-process through the local_render fix, "
            f"which is {how}; unset SPECULATORS_QWEN_COMPAT or drop local_render from it"
        )
