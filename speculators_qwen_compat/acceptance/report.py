"""The run's figures for people (one table, one column per endpoint) and for programs (JSON).

Why: the choice users face (their drafter, the model's own MTP, no speculation) is read across
one row; an endpoint without speculative decoding has tokens/s only, and used alone it gets
one line saying so. Definitions are vLLM's (counters.py).
"""

from __future__ import annotations

from typing import Any

from speculators_qwen_compat.acceptance.measure import Result

NOT_SPECULATIVE = "no speculative decoding (no vllm:spec_decode_* counters)"
NO_METRICS = "no /metrics: not vLLM's OpenAI server, acceptance unknown"


def as_json(result: Result) -> dict[str, Any]:
    """One endpoint's figures; the counters' fields are None without speculative decoding."""
    added = result.increase
    return {
        "endpoint": result.endpoint,
        "model": result.model,
        "requests": result.requests,
        "refused": dict(result.skipped),
        "failed": result.failed.total(),
        "completion_tokens": result.completion_tokens,
        "drafts": added.drafts if added else None,
        "draft_tokens": added.draft_tokens if added else None,
        "accepted_tokens": added.accepted_tokens if added else None,
        "acceptance_rate": added.acceptance_rate if added else None,
        "mean_acceptance_length": added.mean_acceptance_length if added else None,
        "per_position": added.per_position if added else None,
        "per_position_accepted": added.per_position_accepted if added else None,
        "seconds": result.seconds,
        "tokens_per_second": result.tokens_per_second,
        "running_requests_at_start": result.running_at_start,
    }


def _why_not(result: Result) -> str:
    return NOT_SPECULATIVE if result.has_metrics else NO_METRICS


def one_line(result: Result) -> str:
    """A lone endpoint without speculative decoding."""
    return (
        f"{result.endpoint}: {_why_not(result)}: {result.requests} requests{_lost(result)}, "
        f"{result.completion_tokens} tokens in {result.seconds:.1f} s, "
        f"{result.tokens_per_second:.1f} tokens/s"
    )


def _lost(result: Result) -> str:
    refused, failed = result.skipped.total(), result.failed.total()
    return (f" ({refused} refused)" if refused else "") + (f" ({failed} failed)" if failed else "")


def _cells(result: Result, positions: int) -> list[str]:
    added = result.increase
    plain = [
        result.model, str(result.requests), str(result.skipped.total()),
        str(result.failed.total()), str(result.completion_tokens),
        f"{result.seconds:.1f}", f"{result.tokens_per_second:.1f}",
    ]  # fmt: skip
    if added is None:
        return plain + ["-"] * (5 + positions)
    rate, length, per_position = (
        added.acceptance_rate, added.mean_acceptance_length, added.per_position or []
    )  # fmt: skip
    figures = [
        str(added.drafts), str(added.draft_tokens), str(added.accepted_tokens),
        "-" if rate is None else f"{rate:.1%}", "-" if length is None else f"{length:.2f}",
    ]  # fmt: skip
    by_position = [f"{v:.1%}" for v in per_position]
    return plain + figures + by_position + ["-"] * (positions - len(by_position))


def table(results: list[Result]) -> str:
    """One column per endpoint, one row per figure."""
    positions = max((len(r.increase.per_position_accepted) for r in results if r.increase),
                    default=0)  # fmt: skip
    names = [
        "model", "requests", "refused requests", "failed requests", "completion tokens",
        "seconds", "tokens/s", "drafts", "draft tokens", "accepted tokens", "acceptance rate",
        "mean acceptance length",
        *(f"accepted at position {i}" for i in range(positions)),
    ]  # fmt: skip
    columns = [[r.endpoint, *_cells(r, positions)] for r in results]
    widths = [max(len(cell) for cell in column) for column in columns]
    label = max(len(name) for name in names)
    lines = []
    for row, name in enumerate(["", *names]):
        cells = [column[row].rjust(width) for column, width in zip(columns, widths, strict=True)]
        lines.append("  ".join([name.ljust(label), *cells]).rstrip())
    for result in results:
        if result.increase is None:
            lines.append(f"{result.endpoint}: {_why_not(result)}: tokens/s only")
    return "\n".join(lines)
