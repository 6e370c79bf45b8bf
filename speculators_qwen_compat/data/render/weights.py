"""Per-turn training weights: assistant turns with ``weight`` 0 stay context, never supervised.

Their tokens leave the loss mask whichever way the release masks (pattern or assistant-mask runs
on <= 0.7, boundary rows on 0.8+). When turns and matches cannot be told apart, the conversation
is skipped with ``WeightsUnplaceable``'s message rather than trained wrongly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# Which turns of a row have weight 0 travels with the row's conversation itself
# (data/normalize/batch.py ``ReadConversation.weightless``): the conversations stage reads them,
# the row guard unsets them.


@dataclass
class WeightedRow:
    """<= 0.7: a row upstream renders alone because some of its assistant turns have weight 0
    (the row guard's, on the open batch: data/account/ledger.py ``Batch.row``): their ranks
    among its assistant turns, how many assistant turns it has as written and as upstream's
    normaliser left them (after <= 0.6's random ``--turn-dropout`` cut: what its mask holds),
    and whether the mask stage unset them (or why it could not)."""

    ordinals: list[int]
    written_turns: int
    rendered_turns: int | None = None
    placed: bool = False
    error: Exception | None = None

    @property
    def assistant_turns(self) -> int:
        return self.rendered_turns or self.written_turns


def assistant_turns(turns: list[dict[str, Any]]) -> int:
    return sum(turn.get("role") == "assistant" for turn in turns)


class WeightsUnplaceable(ValueError):
    """The weight-0 turns cannot be located in this row's mask; the message is the reason."""

    data_problem = True  # counted as a skipped row, never as a bug (data/account/row_errors.py)


def assistant_ordinals(
    conversation: list[dict[str, Any]], zero_weight_turns: list[int] | tuple[int, ...]
) -> list[int]:
    """For turn indices of weight-0 assistant turns, their rank among the assistant turns."""
    ranks = [i for i, turn in enumerate(conversation) if turn.get("role") == "assistant"]
    return [rank for rank, index in enumerate(ranks) if index in zero_weight_turns]


def unset_matches(
    mask: Any,
    text: str,
    offsets: list[tuple[int, int]],
    pattern: Any,
    ordinals: list[int],
    assistant_turns: int,
) -> None:
    """Pattern masks: unset the tokens of the ``ordinals``-th matches of ``pattern``."""
    matches = list(re.finditer(pattern, text, re.DOTALL))
    if len(matches) != assistant_turns:
        raise WeightsUnplaceable(
            f"weight-0 turns cannot be placed: the mask pattern matches {len(matches)} times "
            f"for {assistant_turns} assistant turns"
        )
    for ordinal in ordinals:
        start, end = matches[ordinal].start(1), matches[ordinal].end(1)
        for index, (token_start, token_end) in enumerate(offsets):
            if token_end > start and token_start < end:
                mask[index] = 0


def unset_runs(mask: Any, ordinals: list[int], assistant_turns: int, clipped: bool) -> None:
    """Assistant masks: unset the ``ordinals``-th runs of ones (fewer runs only if clipped)."""
    values = [int(v) for v in (mask.tolist() if hasattr(mask, "tolist") else mask)]
    runs: list[tuple[int, int]] = []
    for index, value in enumerate(values):
        if value and (index == 0 or not values[index - 1]):
            runs.append((index, index + 1))
        elif value:
            runs[-1] = (runs[-1][0], index + 1)
    if len(runs) != assistant_turns and not (clipped and len(runs) < assistant_turns):
        raise WeightsUnplaceable(
            f"weight-0 turns cannot be placed: the assistant mask has {len(runs)} spans "
            f"for {assistant_turns} assistant turns"
        )
    for ordinal in ordinals:
        if ordinal < len(runs):
            start, end = runs[ordinal]
            for index in range(start, end):
                mask[index] = 0


def drop_zero_weight_rows(
    rows: list[dict[str, Any]], zero_weight_turns: list[int] | tuple[int, ...]
) -> list[dict[str, Any]]:
    """0.8+: the boundary rows of weight-0 turns left out (the row of turn j carries
    ``conv[:j+1]``)."""
    return [row for row in rows if len(row.get("conv") or ()) - 1 not in zero_weight_turns]


def unset_in_pattern_mask(
    row: WeightedRow, mask: Any, text: str, offsets: Any, pattern: Any
) -> None:
    """<= 0.7, a pattern-masked row rendered alone: its weight-0 turns unset in ``mask`` (the
    row remembers that they were, or why they could not be: 0.7 catches it inside the row)."""
    try:
        unset_matches(mask, text, offsets, pattern, row.ordinals, row.assistant_turns)
    except WeightsUnplaceable as exc:
        row.error = exc
        raise
    row.placed = True
