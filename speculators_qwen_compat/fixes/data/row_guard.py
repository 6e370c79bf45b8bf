"""Fix: one conversation the template rejects is skipped and counted, never the end of the run.

Releases and targets (docs/upstream.md "Row errors"):
- 0.4.x-0.6.x catch only TypeError/ValueError/KeyError/AttributeError/RuntimeError per row
  (0.5.0 :352, 0.6.0.2 :519): a ``jinja2.TemplateError`` ("System message must be at the
  beginning.", "No
  user query found in messages.") escapes the ``datasets.map`` worker and kills the whole step.
  0.7 catches everything but only logs it. Target: ``_preprocess_batch(examples, processor, ...)``,
  called on the whole batch; only when that raises or gives fewer rows than conversations is
  the batch halved down to single rows, each in a try (a call per row cost CPU on every row of
  every run); a row that yields nothing is re-rendered (only then) to name the template's
  reason.
- 0.8+ catch per conversation inside ``_render_conversation_rows`` and return ``[]`` (0.8.1 :368,
  0.9.0 :373), so failures are silent in the counts. Targets: ``_render_conversation_rows`` (guarded
  and counted) and ``_render_boundary_rows`` (its exception is remembered as the reason).
Weight-0 assistant turns (data/weights.py) are unset here too: on <= 0.7 in the row's mask
(``_create_loss_mask_from_offsets`` is wrapped for pattern masks; transformers' assistant masks
are corrected after the row), on 0.8+ by dropping their boundary rows.
In every release a row with no supervised token left (no assistant turn, or none inside
``--seq-length``) is dropped and counted too: <= 0.6 keeps such all-zero rows.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from speculators_qwen_compat.core.fix import Fix, Patcher
from speculators_qwen_compat.core.targets import Found, Shape, Span, Target, present
from speculators_qwen_compat.core.upstream import (
    PREPROCESSING,
    batch_length,
    bind,
    call,
    is_pretokenized,
)
from speculators_qwen_compat.data import ledger, processor_media, weights
from speculators_qwen_compat.data.files import SOURCE_COLUMN
from speculators_qwen_compat.data.weights import CONTEXT_COLUMN

#: A span of a failed batch this short is isolated row by row rather than halved again.
ROW_BY_ROW = 8
#: Upstream's own per-row error line; the ledger counts those rows, so the line is folded into
#: the run's summary instead (see ``_FoldRowErrors``).
UPSTREAM_ROW_ERROR = "Failed to process conversation"
BELOW_MINIMUM = "fewer supervised tokens than --minimum-valid-tokens"
NOTHING_TO_SUPERVISE = (
    "nothing to supervise (no assistant turn after a user turn, or none inside --seq-length)"
)


BATCH = Target(PREPROCESSING, "_preprocess_batch", params=("examples",))
SCRIPT_BATCH = Target(
    PREPROCESSING, "_preprocess_batch", params=("examples", "tokenizer|processor", "max_length")
)
OFFSETS = Target(
    PREPROCESSING,
    "_create_loss_mask_from_offsets",
    params=("text", "offsets", "assistant_pattern"),
    optional=True,
)
RENDER_ROWS = Target(
    PREPROCESSING, "_render_conversation_rows", params=("conv", "idx", "max_length")
)
BOUNDARY_ROWS = Target(PREPROCESSING, "_render_boundary_rows")
#: 0.8+: one row per assistant turn, guarded per conversation; <= 0.7: per row of the batch.
RENDER_ERA = Shape(
    "_render_conversation_rows guarded per conversation",
    (BATCH, RENDER_ROWS, BOUNDARY_ROWS),
    when=(present(PREPROCESSING, RENDER_ROWS.path),),
)
SCRIPT_ERA = Shape("_preprocess_batch guarded per row", (SCRIPT_BATCH, OFFSETS))


class RowGuardFix(Fix):
    name = "row_guard"
    summary = "skip and count a conversation the template or the normaliser rejects"
    modules = (PREPROCESSING,)
    shapes = (RENDER_ERA, SCRIPT_ERA)
    applies_on = Span("0.5.0", "0.9.0")

    def apply(self, found: Found, patcher: Patcher) -> None:
        import logging

        module_name = found.module_name  # upstream's preprocessing module logs per-row errors
        upstream_log = logging.getLogger(module_name)
        patcher.replace(upstream_log, "filters", [*upstream_log.filters, _FoldRowErrors()])
        if found.shape is RENDER_ERA:
            _guard_render_rows(found, patcher)
        else:
            _guard_rows(found, patcher)


def _guard_rows(found: Found, patcher: Patcher) -> None:
    """<= 0.7: upstream's batch function on the whole batch; only a batch that raises or gives
    fewer rows than conversations is halved, down to single rows (``ROW_BY_ROW``), so that one
    bad row costs only itself. Rows with weight-0 turns go alone (their masks are unset inside
    upstream's call)."""
    module = found.module

    current: dict[str, Any] = {
        "ordinals": [], "turns": 0, "placed": False, "error": None, "rendered": None
    }  # fmt: skip

    def loss_mask_from_offsets(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        mask = wrapped(*args, **kwargs)
        if current["ordinals"]:
            arguments = bind(wrapped, args, kwargs).arguments
            text = arguments["text"]
            offsets = arguments["offsets"]
            pattern = arguments["assistant_pattern"]
            turns = current["rendered"].assistant_turns or current["turns"]
            try:
                weights.unset_matches(mask, text, offsets, pattern, current["ordinals"], turns)
            except weights.WeightsUnplaceable as exc:
                current["error"] = exc
                raise
            current["placed"] = True
        return mask

    def preprocess_batch(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        bound = bind(wrapped, args, kwargs)
        examples = bound.arguments["examples"]
        if is_pretokenized(examples) or not examples.get("conversations"):
            return wrapped(*args, **kwargs)
        processor = bound.arguments.get("processor") or bound.arguments.get("tokenizer")
        max_length = bound.arguments["max_length"]
        # Upstream drops rows under --minimum-valid-tokens without a word: filter here instead,
        # so that such a row is counted with its own reason.
        minimum = bound.arguments.get("minimum_valid_tokens")
        if minimum is not None:
            bound.arguments["minimum_valid_tokens"] = None
        contexts = examples.get(CONTEXT_COLUMN)
        merged: dict[str, list[Any]] = {}

        def rows(start: int, stop: int) -> dict[str, list[Any]]:
            return {k: v[start:stop] for k, v in examples.items()}

        def settle(i: int, out: dict[str, list[Any]], j: int | None) -> None:
            """Count conversation ``i`` by its row ``j`` of ``out`` (None: it gave none) and
            keep that row when it supervises enough tokens."""
            where = _where(examples, i)
            mask = out["loss_mask"][j] if j is not None else None
            if mask is not None and _supervised(mask):
                if not _enough(mask, minimum):
                    ledger.skip(BELOW_MINIMUM, where)
                    return
                ledger.keep()
                for column, values in out.items():
                    merged.setdefault(column, []).append(values[j])
            elif current["error"] is not None:  # 0.7 catches and logs it inside the row
                ledger.reject(current["error"], where)
            else:
                _diagnose(module, rows(i, i + 1), processor, where)

        def one_row(i: int) -> None:
            conversation = examples["conversations"][i]
            current["ordinals"] = weights.assistant_ordinals(
                conversation, contexts[i] if contexts else []
            )
            current["turns"] = sum(t.get("role") == "assistant" for t in conversation)
            current["placed"], current["error"] = False, None
            try:
                bound.arguments["examples"] = rows(i, i + 1)
                with weights.rendering_row() as rendered:
                    current["rendered"] = rendered
                    out = call(wrapped, bound)
                if current["ordinals"] and not current["placed"]:
                    for mask in out.get("loss_mask", []):
                        clipped = isinstance(max_length, int) and len(mask) >= max_length
                        turns = rendered.assistant_turns or current["turns"]
                        weights.unset_runs(mask, current["ordinals"], turns, clipped)
            except Exception as exc:
                ledger.reject(exc, _where(examples, i))
                return
            finally:
                current["ordinals"] = []
            settle(i, out, 0 if out.get("loss_mask") else None)

        def span(start: int, stop: int) -> None:
            """Rows ``start:stop`` in one call; halved when upstream raises or drops a row
            (at most one row per conversation, in order: as many out as in is row i from
            conversation i)."""
            if stop - start <= ROW_BY_ROW:
                for i in range(start, stop):
                    one_row(i)
                return
            current["error"] = None
            bound.arguments["examples"] = rows(start, stop)
            try:
                out = call(wrapped, bound)
            except Exception:
                out = None
            if out is None or len(out.get("loss_mask", ())) != stop - start:
                middle = (start + stop) // 2
                span(start, middle)
                span(middle, stop)
                return
            for j, i in enumerate(range(start, stop)):
                settle(i, out, j)

        n = batch_length(examples)
        with ledger.batch(n):
            start = 0
            for i in range(n):
                if contexts and contexts[i]:  # weight-0 turns: unset in this row's own call
                    span(start, i)
                    one_row(i)
                    start = i + 1
            span(start, n)
        if not merged:  # every row skipped: the columns upstream would have given
            merged = {"input_ids": [], "loss_mask": [], "seq_len": []}
            if processor_media.is_multimodal(processor):
                merged["messages"] = []
        return merged

    patcher.wrap(*found.place(SCRIPT_BATCH), preprocess_batch)
    if found.has(OFFSETS):
        patcher.wrap(*found.place(OFFSETS), loss_mask_from_offsets)


def _guard_render_rows(found: Found, patcher: Patcher) -> None:
    """0.8+: guard each conversation; remember why a render failed, for the count."""
    state: dict[str, Any] = {"error": None, "sources": None, "contexts": None, "minimum": None}

    def preprocess_batch(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        arguments = bind(wrapped, args, kwargs).arguments
        examples = arguments["examples"]
        state["minimum"] = arguments.get("minimum_valid_tokens")
        state["sources"] = examples.get(SOURCE_COLUMN)
        state["contexts"] = examples.get(CONTEXT_COLUMN)
        with ledger.batch(batch_length(examples)):
            try:
                return wrapped(*args, **kwargs)
            finally:
                state["sources"] = state["contexts"] = None

    def render_boundary_rows(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        try:
            return wrapped(*args, **kwargs)
        except Exception as exc:
            state["error"] = exc
            raise

    def render_conversation_rows(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        arguments = bind(wrapped, args, kwargs).arguments
        idx = arguments["idx"]
        max_length = arguments["max_length"]
        sources = state["sources"]
        where = sources[idx] if sources and isinstance(idx, int) else f"row {idx} of its batch"
        state["error"] = None
        try:
            rows = wrapped(*args, **kwargs)
        except Exception as exc:
            ledger.reject(exc, where)
            return None  # upstream's "unusable conversation"
        contexts = state["contexts"]
        if rows and contexts and isinstance(idx, int) and contexts[idx]:
            rows = weights.drop_context_rows(rows, contexts[idx])
        if rows is None:
            ledger.skip("conversation is empty or not a list", where)
        elif state["error"] is not None:
            ledger.reject(state["error"], where)
        else:
            masks = [row["loss_mask"][:max_length] for row in rows]
            if any(_enough(mask, state["minimum"]) for mask in masks if _supervised(mask)):
                ledger.keep()
            elif any(_supervised(mask) for mask in masks):
                ledger.skip(BELOW_MINIMUM, where)  # upstream's _append_row "filtered"
            else:
                ledger.skip(NOTHING_TO_SUPERVISE, where)
        return rows

    patcher.wrap(*found.place(BATCH), preprocess_batch)
    patcher.wrap(*found.place(BOUNDARY_ROWS), render_boundary_rows)
    patcher.wrap(*found.place(RENDER_ROWS), render_conversation_rows)


def _where(examples: dict[str, list[Any]], i: int) -> str:
    sources = examples.get(SOURCE_COLUMN)
    return sources[i] if sources else f"row {i} of its batch"


def _supervised(mask: Any) -> bool:
    total = mask.sum() if hasattr(mask, "sum") else sum(mask)
    return bool(total > 0)


def _enough(mask: Any, minimum: int | None) -> bool:
    if minimum is None:
        return True
    total = mask.sum() if hasattr(mask, "sum") else sum(mask)
    return bool(total >= minimum)


def _diagnose(module: ModuleType, one: dict[str, list[Any]], processor: Any, where: str) -> None:
    """Why a row gave nothing (upstream caught and logged its error): render it again, only on
    this failure path, to count the template's own message, else nothing to supervise."""
    try:
        conversation = module._normalize_conversation(one["conversations"][0])
        tools = (one.get("tools") or [None])[0]
        processor.apply_chat_template(conversation, tools=tools or None, tokenize=False)
    except Exception as exc:
        ledger.reject(exc, where)
        return
    ledger.skip(NOTHING_TO_SUPERVISE, where)


class _FoldRowErrors:
    """A filter on upstream's preprocessing logger: during a counted run (the ledger is open)
    its per-row "Failed to process conversation ..." lines are dropped, since the ledger
    counts those rows and the run's summary names their reasons."""

    def filter(self, record: Any) -> bool:
        if not os.environ.get(ledger.LEDGER_ENV):
            return True
        return UPSTREAM_ROW_ERROR not in record.getMessage()
