"""What the row guard counts per conversation (docs/upstream.md, "Row errors"): a conversation
kept, skipped with its reason (the template's, the data's, too few supervised tokens), or an
error that is not the data's; speculator-format rows counted the same way. The counts go to the
open batch (ledger.py); upstream's own per-row error lines are folded into them."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from speculators_qwen_compat.core.run_options import current_options
from speculators_qwen_compat.core.upstream import batch_length, bind, call
from speculators_qwen_compat.data.account import ledger
from speculators_qwen_compat.data.read import speculator_rows
from speculators_qwen_compat.data.read.files import SOURCE_COLUMN
from speculators_qwen_compat.data.render import weights

#: A span of a failed batch this short is isolated row by row rather than halved again.
ROW_BY_ROW = 8
#: Upstream's own per-row error line; the ledger counts those rows, so the line is folded into
#: the run's summary instead (see ``_FoldRowErrors``).
UPSTREAM_ROW_ERROR = "Failed to process conversation"
BELOW_MINIMUM = "fewer supervised tokens than --minimum-valid-tokens"
NOTHING_TO_SUPERVISE = (
    "nothing to supervise (no assistant turn after a user turn, or none inside --seq-length)"
)


def rendered(rows: Any, where: str, zero_weight_turns: tuple[int, ...], max_length: int) -> Any:
    """0.8+: count one conversation by the boundary rows upstream rendered for it (None:
    upstream found it unusable; the open batch's ``render_error``: why its render failed), its
    weight-0 turns' rows dropped first; the rows upstream goes on with."""
    opened = ledger.open_batch()
    error = opened.render_error if opened is not None else None
    minimum = opened.minimum if opened is not None else None
    if rows and zero_weight_turns:
        rows = weights.drop_zero_weight_rows(rows, zero_weight_turns)
    if rows is None:
        ledger.skip("conversation is empty or not a list", where)
    elif error is not None:
        ledger.reject(error, where)
    else:
        masks = [row["loss_mask"][:max_length] for row in rows]
        if any(enough(mask, minimum) for mask in masks if supervised(mask)):
            ledger.keep()
        elif any(supervised(mask) for mask in masks):
            ledger.skip(BELOW_MINIMUM, where)  # upstream's _append_row "filtered"
        else:
            ledger.skip(NOTHING_TO_SUPERVISE, where)
    return rows


def passthrough(wrapped: Any, args: tuple, kwargs: dict) -> Any:
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
            where = where_of(examples, i)
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


def unsupported(examples: dict[str, list[Any]]) -> None:
    """<= 0.6: speculator-format rows are not readable there; each counted with that reason."""
    with ledger.batch(batch_length(examples)):
        for i in range(batch_length(examples)):
            ledger.skip(speculator_rows.UNSUPPORTED, where_of(examples, i))


def where_of(examples: dict[str, list[Any]], i: int) -> str:
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


def diagnose(module: ModuleType, one: dict[str, list[Any]], processor: Any, where: str) -> None:
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


class FoldRowErrors:
    """A filter on upstream's preprocessing logger: during a counted run (the ledger is open)
    its per-row "Failed to process conversation ..." lines are dropped, since the ledger
    counts those rows and the run's summary names their reasons."""

    def filter(self, record: Any) -> bool:
        if not current_options().ledger_dir:
            return True
        return UPSTREAM_ROW_ERROR not in record.getMessage()
