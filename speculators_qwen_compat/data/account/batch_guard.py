"""<= 0.7: one call of upstream's ``_preprocess_batch`` guarded, so one bad row costs only itself.

The whole batch goes to upstream at once; only a batch that raises or gives fewer rows than
conversations is halved, down to single rows (``ROW_BY_ROW``). Rows with weight-0 turns go alone,
their turns unset in upstream's mask (data/render/weights.py ``WeightedRow``, on the open batch)."""

from __future__ import annotations

from inspect import BoundArguments
from types import ModuleType
from typing import Any

from speculators_qwen_compat.core.upstream import batch_length, call
from speculators_qwen_compat.data.account import ledger
from speculators_qwen_compat.data.account.rows import (
    BELOW_MINIMUM,
    ROW_BY_ROW,
    diagnose,
    enough,
    supervised,
    where_of,
)
from speculators_qwen_compat.data.normalize import processor_media
from speculators_qwen_compat.data.normalize.batch import zero_weight_turns_of
from speculators_qwen_compat.data.render import weights


class BatchGuard:
    """Every conversation of the batch counted once (kept, skipped or an error) and the rows
    kept merged in order."""

    def __init__(self, module: ModuleType, wrapped: Any, bound: BoundArguments) -> None:
        self.module, self.wrapped, self.bound = module, wrapped, bound
        self.examples: dict[str, list[Any]] = bound.arguments["examples"]
        self.processor = bound.arguments.get("processor") or bound.arguments.get("tokenizer")
        self.max_length = bound.arguments["max_length"]
        # Upstream drops rows under --minimum-valid-tokens without a word: filter here instead,
        # so that such a row is counted with its own reason.
        self.minimum = bound.arguments.get("minimum_valid_tokens")
        if self.minimum is not None:
            bound.arguments["minimum_valid_tokens"] = None
        self.merged: dict[str, list[Any]] = {}
        self.batch: ledger.Batch | None = None

    def run(self) -> dict[str, list[Any]]:
        n = batch_length(self.examples)
        with ledger.batch(n) as self.batch:
            start = 0
            conversations = self.examples["conversations"]
            for i in range(n):
                if zero_weight_turns_of(conversations[i]):  # unset in its own call
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
        assert self.batch is not None
        conversation = self.examples["conversations"][i]
        ordinals = weights.assistant_ordinals(conversation, zero_weight_turns_of(conversation))
        row = weights.WeightedRow(ordinals, weights.assistant_turns(conversation))
        self.batch.row = row
        try:
            self.bound.arguments["examples"] = self.rows(i, i + 1)
            out = call(self.wrapped, self.bound)
            if row.ordinals and not row.placed:
                for mask in out.get("loss_mask", []):
                    clipped = isinstance(self.max_length, int) and len(mask) >= self.max_length
                    weights.unset_runs(mask, row.ordinals, row.assistant_turns, clipped)
        except Exception as exc:
            ledger.reject(exc, where_of(self.examples, i))
            return
        finally:
            self.batch.row = None
        self.settle(i, out, 0 if out.get("loss_mask") else None, row.error)

    def settle(
        self, i: int, out: dict[str, list[Any]], j: int | None, error: Exception | None = None
    ) -> None:
        """Count conversation ``i`` by its row ``j`` of ``out`` (None: it gave none; ``error``:
        why its weight-0 turns could not be placed) and keep that row when it supervises
        enough tokens."""
        where = where_of(self.examples, i)
        mask = out["loss_mask"][j] if j is not None else None
        if mask is not None and supervised(mask):
            if not enough(mask, self.minimum):
                ledger.skip(BELOW_MINIMUM, where)
                return
            ledger.keep()
            for column, values in out.items():
                self.merged.setdefault(column, []).append(values[j])
        elif error is not None:  # 0.7 catches and logs it inside the row
            ledger.reject(error, where)
        else:
            diagnose(self.module, self.rows(i, i + 1), self.processor, where)
