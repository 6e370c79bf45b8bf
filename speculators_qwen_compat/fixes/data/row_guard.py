"""Fix: one conversation the template rejects is skipped and counted, never the end of the run.

Why: <= 0.6 let a ``TemplateError`` kill the map, later releases drop it uncounted
(docs/upstream.md, "Row errors"). Targets: ``_preprocess_batch`` (<= 0.7), 0.8+'s
``_render_conversation_rows``/``_render_boundary_rows``, ``_passthrough_pretokenized``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from inspect import BoundArguments
from types import ModuleType
from typing import Any

from speculators_qwen_compat.core.fix import Fix, Patcher
from speculators_qwen_compat.core.run_options import current_options
from speculators_qwen_compat.core.targets import Found, ReleaseRange, Shape, Target, present
from speculators_qwen_compat.core.upstream import (
    PREPROCESSING,
    batch_length,
    bind,
    call,
    is_pretokenized,
)
from speculators_qwen_compat.data.account import ledger
from speculators_qwen_compat.data.normalize import processor_media
from speculators_qwen_compat.data.read import speculator_rows
from speculators_qwen_compat.data.read.files import SOURCE_COLUMN
from speculators_qwen_compat.data.render import weights
from speculators_qwen_compat.fixes import route
from speculators_qwen_compat.fixes.route import context_of

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
#: 0.7+: speculator-format rows (input_ids + loss_mask) are passed through here, uncounted.
PASSTHROUGH = Target(
    PREPROCESSING,
    "_passthrough_pretokenized",
    params=("examples", "max_length", "minimum_valid_tokens"),
    optional=True,
)
#: 0.8+: one row per assistant turn, guarded per conversation; <= 0.7: per row of the batch.
RENDER_ERA = Shape(
    "_render_conversation_rows guarded per conversation",
    (BATCH, RENDER_ROWS, BOUNDARY_ROWS, PASSTHROUGH),
    when=(present(PREPROCESSING, RENDER_ROWS.path),),
)
SCRIPT_ERA = Shape("_preprocess_batch guarded per row", (SCRIPT_BATCH, OFFSETS, PASSTHROUGH))


class RowGuardFix(Fix):
    name = "row_guard"
    summary = "skip and count a conversation the template or the normaliser rejects"
    modules = (PREPROCESSING,)
    shapes = (RENDER_ERA, SCRIPT_ERA)
    applies_on = ReleaseRange("0.5.0", "0.9.0")

    def apply(self, found: Found, patcher: Patcher) -> None:
        import logging

        module_name = found.module_name  # upstream's preprocessing module logs per-row errors
        upstream_log = logging.getLogger(module_name)
        patcher.replace(upstream_log, "filters", [*upstream_log.filters, _FoldRowErrors()])
        if found.shape is RENDER_ERA:
            _guard_render_rows(found, patcher)
        else:
            _guard_rows(found, patcher)
        if found.has(PASSTHROUGH):
            patcher.wrap(*found.owner_and_name(PASSTHROUGH), _count_passthrough)


@dataclass
class _RowState:
    """The row in progress, shared by the batch guard and the mask wrapper inside its call."""

    ordinals: list[int] = field(default_factory=list)  # its weight-0 assistant turns' ranks
    turns: int = 0  # its assistant turns as written
    placed: bool = False  # the weight-0 turns were unset in a pattern mask
    error: Exception | None = None  # why placing them failed (0.7 catches it inside the row)
    rendered: weights.RowTurns | None = None


def _guard_rows(found: Found, patcher: Patcher) -> None:
    """<= 0.7: upstream's batch function on the whole batch; only a batch that raises or gives
    fewer rows than conversations is halved, down to single rows (``ROW_BY_ROW``), so that one
    bad row costs only itself. Rows with weight-0 turns go alone (their masks are unset inside
    upstream's call)."""
    current = _RowState()

    def loss_mask_from_offsets(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        mask = wrapped(*args, **kwargs)
        if current.ordinals:
            arguments = bind(wrapped, args, kwargs).arguments
            rendered = current.rendered
            turns = (rendered.assistant_turns if rendered else None) or current.turns
            try:
                weights.unset_matches(
                    mask,
                    arguments["text"],
                    arguments["offsets"],
                    arguments["assistant_pattern"],
                    current.ordinals,
                    turns,
                )
            except weights.WeightsUnplaceable as exc:
                current.error = exc
                raise
            current.placed = True
        return mask

    def preprocess_batch(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        bound = bind(wrapped, args, kwargs)
        examples = bound.arguments["examples"]
        if is_pretokenized(examples) and not found.has(PASSTHROUGH):  # <= 0.6: not readable
            with ledger.batch(batch_length(examples)):
                for i in range(batch_length(examples)):
                    ledger.skip(speculator_rows.UNSUPPORTED, _where(examples, i))
            return wrapped(*args, **kwargs)
        if is_pretokenized(examples) or not examples.get("conversations"):
            return wrapped(*args, **kwargs)
        return _BatchGuard(found.module, wrapped, bound, current).run()

    route.wrap(found, patcher, SCRIPT_BATCH, RowGuardFix.name, preprocess_batch)
    if found.has(OFFSETS):
        route.wrap(found, patcher, OFFSETS, RowGuardFix.name, loss_mask_from_offsets)


class _BatchGuard:
    """One call of upstream's ``_preprocess_batch`` (<= 0.7), guarded: every conversation of
    the batch counted once (kept, skipped or an error) and the rows kept merged in order."""

    def __init__(
        self, module: ModuleType, wrapped: Any, bound: BoundArguments, current: _RowState
    ) -> None:
        self.module, self.wrapped, self.bound, self.current = module, wrapped, bound, current
        self.examples: dict[str, list[Any]] = bound.arguments["examples"]
        self.processor = bound.arguments.get("processor") or bound.arguments.get("tokenizer")
        self.max_length = bound.arguments["max_length"]
        # Upstream drops rows under --minimum-valid-tokens without a word: filter here instead,
        # so that such a row is counted with its own reason.
        self.minimum = bound.arguments.get("minimum_valid_tokens")
        if self.minimum is not None:
            bound.arguments["minimum_valid_tokens"] = None
        self.merged: dict[str, list[Any]] = {}

    def run(self) -> dict[str, list[Any]]:
        n = batch_length(self.examples)
        with ledger.batch(n):
            start = 0
            conversations = self.examples["conversations"]
            for i in range(n):
                if context_of(conversations[i]):  # weight-0 turns: unset in its own call
                    self.span(start, i)
                    self.one_row(i)
                    start = i + 1
            self.span(start, n)
        if self.merged:
            return self.merged
        # every row skipped: the columns upstream would have given
        empty: dict[str, list[Any]] = {"input_ids": [], "loss_mask": [], "seq_len": []}
        if processor_media.is_multimodal(self.processor):
            empty["messages"] = []
        return empty

    def rows(self, start: int, stop: int) -> dict[str, list[Any]]:
        return {k: v[start:stop] for k, v in self.examples.items()}

    def span(self, start: int, stop: int) -> None:
        """Rows ``start:stop`` in one call; halved when upstream raises or drops a row (at most
        one row per conversation, in order: as many out as in is row i from conversation i)."""
        if stop - start <= ROW_BY_ROW:
            for i in range(start, stop):
                self.one_row(i)
            return
        self.current.error = None
        self.bound.arguments["examples"] = self.rows(start, stop)
        try:
            out = call(self.wrapped, self.bound)
        except Exception:
            out = None
        if out is None or len(out.get("loss_mask", ())) != stop - start:
            middle = (start + stop) // 2
            self.span(start, middle)
            self.span(middle, stop)
            return
        for j, i in enumerate(range(start, stop)):
            self.settle(i, out, j)

    def one_row(self, i: int) -> None:
        """Row ``i`` alone, its weight-0 turns unset in (or after) upstream's call."""
        current = self.current
        conversation = self.examples["conversations"][i]
        current.ordinals = weights.assistant_ordinals(conversation, context_of(conversation))
        current.turns = sum(t.get("role") == "assistant" for t in conversation)
        current.placed, current.error = False, None
        try:
            self.bound.arguments["examples"] = self.rows(i, i + 1)
            with weights.rendering_row() as rendered:
                current.rendered = rendered
                out = call(self.wrapped, self.bound)
            if current.ordinals and not current.placed:
                for mask in out.get("loss_mask", []):
                    clipped = isinstance(self.max_length, int) and len(mask) >= self.max_length
                    turns = rendered.assistant_turns or current.turns
                    weights.unset_runs(mask, current.ordinals, turns, clipped)
        except Exception as exc:
            ledger.reject(exc, _where(self.examples, i))
            return
        finally:
            current.ordinals = []
        self.settle(i, out, 0 if out.get("loss_mask") else None)

    def settle(self, i: int, out: dict[str, list[Any]], j: int | None) -> None:
        """Count conversation ``i`` by its row ``j`` of ``out`` (None: it gave none) and keep
        that row when it supervises enough tokens."""
        where = _where(self.examples, i)
        mask = out["loss_mask"][j] if j is not None else None
        if mask is not None and supervised(mask):
            if not enough(mask, self.minimum):
                ledger.skip(BELOW_MINIMUM, where)
                return
            ledger.keep()
            for column, values in out.items():
                self.merged.setdefault(column, []).append(values[j])
        elif self.current.error is not None:  # 0.7 catches and logs it inside the row
            ledger.reject(self.current.error, where)
        else:
            _diagnose(self.module, self.rows(i, i + 1), self.processor, where)


@dataclass
class _RenderState:
    """0.8+: the batch in progress, shared by this fix's wrappers inside its call."""

    sources: list[str] | None = None  # each row's ``file:line`` (SOURCE_COLUMN)
    minimum: int | None = None  # --minimum-valid-tokens, filtered here to count it
    error: Exception | None = None  # why the conversation's render failed, for the count


def _guard_render_rows(found: Found, patcher: Patcher) -> None:
    """0.8+: guard each conversation; remember why a render failed, for the count."""
    state = _RenderState()

    def preprocess_batch(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        arguments = bind(wrapped, args, kwargs).arguments
        examples = arguments["examples"]
        state.minimum = arguments.get("minimum_valid_tokens")
        state.sources = examples.get(SOURCE_COLUMN)
        with ledger.batch(batch_length(examples)):
            try:
                return wrapped(*args, **kwargs)
            finally:
                state.sources = None

    def render_boundary_rows(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        try:
            return wrapped(*args, **kwargs)
        except Exception as exc:
            state.error = exc
            raise

    def render_conversation_rows(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        arguments = bind(wrapped, args, kwargs).arguments
        idx = arguments["idx"]
        max_length = arguments["max_length"]
        sources = state.sources
        where = sources[idx] if sources and isinstance(idx, int) else f"row {idx} of its batch"
        state.error = None
        context = context_of(arguments["conv"])  # read first: a rejected row is read too
        try:
            rows = wrapped(*args, **kwargs)
        except Exception as exc:
            ledger.reject(exc, where)
            return None  # upstream's "unusable conversation"
        if rows and context:
            rows = weights.drop_context_rows(rows, list(context))
        if rows is None:
            ledger.skip("conversation is empty or not a list", where)
        elif state.error is not None:
            ledger.reject(state.error, where)
        else:
            masks = [row["loss_mask"][:max_length] for row in rows]
            if any(enough(mask, state.minimum) for mask in masks if supervised(mask)):
                ledger.keep()
            elif any(supervised(mask) for mask in masks):
                ledger.skip(BELOW_MINIMUM, where)  # upstream's _append_row "filtered"
            else:
                ledger.skip(NOTHING_TO_SUPERVISE, where)
        return rows

    route.wrap(found, patcher, BATCH, RowGuardFix.name, preprocess_batch)
    patcher.wrap(*found.owner_and_name(BOUNDARY_ROWS), render_boundary_rows)
    patcher.wrap(*found.owner_and_name(RENDER_ROWS), render_conversation_rows)


def _count_passthrough(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """0.7+: speculator-format rows counted like conversations. A row upstream cannot keep is
    skipped with its reason (data/read/speculator_rows.py) and left out of upstream's call, which
    then keeps every row it is given (0.8+ would drop a row with nothing supervised inside
    ``--seq-length`` without a count; every release raises on a row whose lengths differ,
    ending the run); each row's id goes to the duplicate check."""
    bound = bind(wrapped, args, kwargs)
    examples = bound.arguments["examples"]
    max_length = bound.arguments["max_length"]
    minimum = bound.arguments.get("minimum_valid_tokens")
    n = batch_length(examples)
    row_ids = examples.get("id")
    keep: list[int] = []
    with ledger.batch(n):
        quality = ledger.quality()
        for i in range(n):
            where = _where(examples, i)
            ids, mask = examples["input_ids"][i], examples["loss_mask"][i]
            reason = speculator_rows.unusable(ids, mask, max_length)
            if reason == speculator_rows.NOT_LISTS:
                ledger.skip(reason, where)
                continue
            key = speculator_rows.identity(row_ids[i] if row_ids else None, ids, mask)
            quality.add_key(where, speculator_rows.COLUMN, key)
            if reason is None and not enough(mask[:max_length], minimum):
                reason = BELOW_MINIMUM
            if reason is not None:
                ledger.skip(reason, where)
                continue
            keep.append(i)
        bound.arguments["examples"] = {
            column: [examples[column][i] for i in keep] for column in ("input_ids", "loss_mask")
        }
        out = call(wrapped, bound)
        kept = len(out["input_ids"])
        for _ in range(kept):
            ledger.keep()
        for _ in range(len(keep) - kept):  # no release drops more: counted if one does
            ledger.skip(speculator_rows.DROPPED_UPSTREAM)
    return out


def _where(examples: dict[str, list[Any]], i: int) -> str:
    sources = examples.get(SOURCE_COLUMN)
    return sources[i] if sources else f"row {i} of its batch"


def supervised(mask: Any) -> bool:
    total = mask.sum() if hasattr(mask, "sum") else sum(mask)
    return bool(total > 0)


def enough(mask: Any, minimum: int | None) -> bool:
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
        if not current_options().ledger_dir:
            return True
        return UPSTREAM_ROW_ERROR not in record.getMessage()
