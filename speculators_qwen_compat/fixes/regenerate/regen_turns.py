"""Fix: every conversation regenerate-responses reads is planned or skipped with a reason, before
any request.

Target: ``speculators.cli.regenerate_responses.prepare_row(row, config)`` (0.8.1 :102, 0.9.0
:102; docs/upstream.md "Regenerate responses"), and ``build_detokenizer(model)`` (:260), which
names the tokenizer the run loads. Upstream keeps only ``system``/``user`` turns and the tool
results, so rows with no user turn, a leading tool result or empty messages vanish without a
count, ``developer`` and LLaMA-Factory ``observation`` turns are dropped, and a template
rejection (a late system message) is only met as an HTTP 400 after earlier turns were answered.
Here the row goes through prepare_data's normaliser and the target's own template
(data/regen_plan.py): what is left is a ``Plan`` in upstream's ``turns`` slot (the replies fix,
regen_replies.py, regenerates it), what is rejected is counted by reason; rows ``--resume``
finds done are counted as such; a conversation whose first prompt alone reaches
``--max-tokens`` is warned about before it is sent.
Shape needed: ``prepare_row`` taking ``row`` and ``config`` (a DatasetConfig with
``filter_fn``, ``normalize_fn``, ``prompt_field``), ``build_detokenizer`` taking ``model``, and
``_primary_identifier``.
"""

from __future__ import annotations

import logging
from typing import Any

from speculators_qwen_compat.core.fix import Fix, Patcher
from speculators_qwen_compat.core.targets import Found, Shape, Span, Target
from speculators_qwen_compat.core.upstream import CLI_REGENERATE, bind
from speculators_qwen_compat.data import regen_state
from speculators_qwen_compat.data.normalize import BadConversation
from speculators_qwen_compat.data.regen_plan import plan_row

log = logging.getLogger("speculators_qwen_compat")

PREPARE_ROW = Target(CLI_REGENERATE, "prepare_row", params=("row", "config"))
DETOKENIZER = Target(CLI_REGENERATE, "build_detokenizer", params=("model",))
PRIMARY_ID = Target(CLI_REGENERATE, "_primary_identifier", params=("row",))
PRESET_FILTER = "left out by the dataset preset's filter"
LONG_PROMPT = "conversations whose first prompt alone reaches --max-tokens"

_tokenizers: dict[str, Any] = {}


class RegenTurnsFix(Fix):
    name = "regen_turns"
    summary = "regenerate-responses: normalise and template-check each row, count every skip"
    modules = (CLI_REGENERATE,)
    shapes = (Shape("prepare_row normalises and counts", (PREPARE_ROW, DETOKENIZER, PRIMARY_ID)),)
    applies_on = Span("0.8.1", "0.9.0")

    def apply(self, found: Found, patcher: Patcher) -> None:
        primary_id = found.get(PRIMARY_ID)

        def prepare_row(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            arguments = bind(wrapped, args, kwargs).arguments
            return _prepare_row(arguments["row"], arguments["config"], primary_id)

        patcher.wrap(*found.place(PREPARE_ROW), prepare_row)
        patcher.wrap(*found.place(DETOKENIZER), _build_detokenizer)


def _build_detokenizer(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """Upstream loads ``--model`` as a tokenizer for the review-only text; the same tokenizer's
    template is the one the rows are checked against."""
    model = bind(wrapped, args, kwargs).arguments["model"]
    state = regen_state.current()
    if state is not None:
        state.model = model
    return wrapped(*args, **kwargs)


def tokenizer_for(model: str) -> Any:
    tokenizer = _tokenizers.get(model)
    if tokenizer is None:
        from transformers import AutoTokenizer

        tokenizer = _tokenizers[model] = AutoTokenizer.from_pretrained(model)
    return tokenizer


def _prepare_row(row: dict[str, Any], config: Any, primary_id: Any) -> Any:
    state = regen_state.current()
    tally = regen_state.tally()
    tally.conversations_in += 1
    if state is not None and state.seen and primary_id(row) in state.seen:
        tally.resumed += 1
        return row, [{"role": "user", "content": ""}], []  # upstream skips it as done
    if config.filter_fn is not None and not config.filter_fn(row):
        tally.skipped[PRESET_FILTER] += 1
        return None
    normalized = {**row, **config.normalize_fn(row)} if config.normalize_fn else row
    model = getattr(state, "model", None)
    try:
        plan, tools = plan_row(
            normalized, config.prompt_field, tokenizer_for(model) if model else None
        )
    except BadConversation as exc:
        tally.skipped[str(exc)] += 1
        return None
    tally.notes.update(plan.notes)
    max_tokens = getattr(state, "max_tokens", None)
    if max_tokens and plan[0].prompt_tokens >= max_tokens:
        tally.warnings[LONG_PROMPT] += 1
        log.warning(
            "conversation %s: its first prompt is %d tokens, at or above --max-tokens %d "
            "(speculators stops a conversation once prompt + reply exceed it): only its first "
            "reply can be regenerated",
            primary_id(row), plan[0].prompt_tokens, max_tokens,
        )  # fmt: skip
    return {**normalized, "tools": tools}, plan, []
