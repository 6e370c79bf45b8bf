"""How the installed speculators release turns one conversation into masked rows, for ``doctor``.

<= 0.7: one row per conversation (transformers' assistant mask when the fixed probe finds one,
else upstream's pattern); 0.8+: one row per assistant turn, upstream's ``_render_boundary_rows``
rendering locally. Rows are clipped to ``--seq-length`` as the run's are.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

from speculators_qwen_compat.core.errors import CompatError, reason_of
from speculators_qwen_compat.core.fix import FixState
from speculators_qwen_compat.data.render import render as local_renderer
from speculators_qwen_compat.data.render.weights import (
    assistant_ordinals,
    drop_context_rows,
    unset_matches,
    unset_runs,
)
from speculators_qwen_compat.fixes.data.local_render import LOCAL
from speculators_qwen_compat.fixes.data.mask_probe import supports_assistant_mask
from speculators_qwen_compat.fixes.route import context_of

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
    endpoint: str | None = None

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

    def rows(self, conversation: list[dict[str, Any]], tools: Any, max_length: int) -> list[Row]:
        """The rows this conversation gives; raises what the release's render raises."""
        tools = self._tools(tools)
        # weight-0 assistant turns (route.py ReadConversation): context, as the run keeps them
        context = list(context_of(conversation))
        ordinals = assistant_ordinals(conversation, context)
        assistant_turns = sum(turn.get("role") == "assistant" for turn in conversation)
        if self.kind == RENDER_BOUNDARY:
            built = self.preprocessing._render_boundary_rows(
                conversation, self.endpoint, max_length, tools=tools
            )
            # the run's row guard drops the rows of weight-0 turns (fixes/data/row_guard.py)
            built = drop_context_rows(built, context)
            return [Row(r["input_ids"][:max_length], r["loss_mask"][:max_length]) for r in built]
        if self.kind == HF_MASK:
            encoded = self.tokenizer.apply_chat_template(
                conversation,
                tools=tools,
                tokenize=True,
                return_assistant_tokens_mask=True,
                return_dict=True,
            )
            ids, mask = list(encoded["input_ids"]), list(encoded["assistant_masks"])
            if ordinals:  # the run's row guard unsets the weight-0 turns' spans the same way
                unset_runs(mask, ordinals, assistant_turns, clipped=False)
            return [Row(ids[:max_length], [int(m) for m in mask[:max_length]])]
        text = self.tokenizer.apply_chat_template(conversation, tools=tools, tokenize=False)
        encoded = self.tokenizer(
            text,
            return_offsets_mapping=True,
            max_length=max_length,
            truncation=True,
            add_special_tokens=False,
        )
        mask = self.preprocessing._create_loss_mask_from_offsets(
            text, encoded["offset_mapping"], self.pattern
        )
        if ordinals:
            offsets = encoded["offset_mapping"]
            unset_matches(mask, text, offsets, self.pattern, ordinals, assistant_turns)
        return [Row(list(encoded["input_ids"]), [int(m) for m in mask])]

    def _tools(self, tools: Any) -> Any:
        # Only 0.7+ hand a row's tools to the template, parsed by _parse_conv_tools.
        parse = getattr(self.preprocessing, "_parse_conv_tools", None)
        return parse(tools, 0) if parse is not None and tools else None


def pattern_literal(pattern: str) -> str:
    """The pattern on one line: re.escape leaves newlines raw, ``\\n`` matches the same."""
    return pattern.replace("\\\n", "\\n").replace("\n", "\\n")


def detect_strategy(preprocessing: ModuleType, tokenizer: Any, model: str) -> MaskStrategy:
    """The strategy the release will use for this tokenizer's template, decided by shape."""
    if callable(getattr(preprocessing, "_render_boundary_rows", None)):
        _require_local_render()
        local_renderer.remember(model, tokenizer)
        return MaskStrategy(RENDER_BOUNDARY, preprocessing, tokenizer, endpoint=f"{LOCAL}:{model}")
    detect = getattr(preprocessing, "_detect_assistant_pattern", None)
    if not callable(detect):
        raise CompatError(
            "this speculators release has neither _render_boundary_rows nor "
            "_detect_assistant_pattern: doctor does not know how it masks"
        )
    if hasattr(preprocessing, "_supports_assistant_mask") and supports_assistant_mask(
        getattr(preprocessing, "_adapt_conv_for_hf", None), tokenizer
    ):
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
