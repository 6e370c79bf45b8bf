"""vLLM's speculative-decoding counters from ``/metrics``, and what a run added to them.

Why: they are cumulative since the server started and per engine, so a run's figures are the
increase, summed over the served model's engines (vLLM's definitions). ``_created`` timestamps
and the process's start time tell a restart between two reads, which an increase can hide.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

PREFIX = "vllm:spec_decode_num_"
DRAFTS = PREFIX + "drafts_total"
DRAFT_TOKENS = PREFIX + "draft_tokens_total"
ACCEPTED = PREFIX + "accepted_tokens_total"
PER_POSITION = PREFIX + "accepted_tokens_per_pos_total"
RUNNING = "vllm:num_requests_running"
STARTED = "process_start_time_seconds"
_CREATED = tuple(name.removesuffix("_total") + "_created" for name in (DRAFTS, DRAFT_TOKENS,
                 ACCEPTED, PER_POSITION))  # fmt: skip
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?\s*$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass
class Snapshot:
    """One read of ``/metrics``: the speculative counters summed over engines (None: the server
    has no speculative decoding), and the requests running."""

    drafts: float | None = None
    draft_tokens: float = 0.0
    accepted_tokens: float = 0.0
    per_position: dict[int, float] = field(default_factory=dict)
    running: float = 0.0
    #: ``_created`` series (name and labels -> timestamp) and process_start_time_seconds
    created: dict[str, float] = field(default_factory=dict)

    @property
    def speculative(self) -> bool:
        return self.drafts is not None


@dataclass
class Increase:
    """What one run added to the counters, and vLLM's figures from it."""

    drafts: int
    draft_tokens: int
    accepted_tokens: int
    per_position_accepted: list[int]

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted_tokens / self.draft_tokens if self.draft_tokens else None

    @property
    def mean_acceptance_length(self) -> float | None:
        return 1 + self.accepted_tokens / self.drafts if self.drafts else None

    @property
    def per_position(self) -> list[float] | None:
        if not self.drafts:
            return None
        return [accepted / self.drafts for accepted in self.per_position_accepted]


def parse(text: str, model: str | None = None) -> Snapshot:
    """The Prometheus text of ``/metrics`` -> a Snapshot (every engine's series summed); with
    ``model``, series whose ``model_name`` label names another model are left out."""
    snapshot = Snapshot()
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None:  # comments (# HELP, # TYPE) and blank lines
            continue
        name, labels, raw = match.groups()
        if name not in (DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POSITION, RUNNING, STARTED, *_CREATED):
            continue
        found = dict(_LABEL.findall(labels or ""))
        if model is not None and found.get("model_name", model) != model:
            continue
        value = float(raw)
        if not math.isfinite(value):
            continue
        if name == STARTED or name in _CREATED:
            snapshot.created[f"{name}{{{labels or ''}}}"] = value
        elif name == DRAFTS:
            snapshot.drafts = (snapshot.drafts or 0.0) + value
        elif name == DRAFT_TOKENS:
            snapshot.draft_tokens += value
        elif name == ACCEPTED:
            snapshot.accepted_tokens += value
        elif name == RUNNING:
            snapshot.running += value
        else:
            position = int(found.get("position", "0"))
            snapshot.per_position[position] = snapshot.per_position.get(position, 0.0) + value
    return snapshot


def increase(before: Snapshot, after: Snapshot) -> Increase | None:
    """``after`` - ``before``; None when the server has no speculative decoding. A restart in
    between (other creation or start times, counters that appeared or went down): ValueError."""
    if not after.speculative:
        return None
    if not before.speculative:
        raise ValueError("its spec-decode counters appeared during the run: the server restarted")
    if any(before.created[key] != value for key, value in after.created.items()
           if key in before.created):  # fmt: skip
        raise ValueError("its counters were created again during the run: the server restarted")
    start = before
    positions = sorted(set(after.per_position) | set(start.per_position))
    steps = [
        (after.drafts or 0.0) - (start.drafts or 0.0),
        after.draft_tokens - start.draft_tokens,
        after.accepted_tokens - start.accepted_tokens,
        *(after.per_position.get(p, 0.0) - start.per_position.get(p, 0.0) for p in positions),
    ]
    if any(step < 0 for step in steps):
        raise ValueError("its counters went down during the run: the server restarted")
    drafts, drafted, accepted, *per_position = (round(step) for step in steps)
    return Increase(drafts, drafted, accepted, per_position)
