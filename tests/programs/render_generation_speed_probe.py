"""``render_generation_speed_probe.py MODEL``: the ``row_tensors`` speed fix of 0.8+ beside
upstream's own ``_append_row`` as shipped (``inspect.unwrap``: the oracle), in one interpreter
with the fixes on (test_render_generation_speed.py). Prints one JSON line.

The rows: every assistant turn of the demo mix rendered as upstream renders it
(``_render_boundary_rows`` through ``--render-endpoint local``), at several windows (rows cut
mid-answer, answers cut away entirely) and minimum supervised counts, then the inputs the fix
leaves to upstream (empty rows, floats, strings, bools, nested lists, an int past int64, tuples,
tensors). Each case runs on both functions with fresh ``results``: the same answer (or the same
exception type), the same appended tensors (values, dtype, shape) and lengths. ``torch.tensor``
calls are counted: upstream makes two per kept row.
"""

from __future__ import annotations

import inspect
import json
import logging
import sys
from typing import Any

import torch
from speculators.data_generation import preprocessing

import speculators_qwen_compat
from speculators_qwen_compat.demo import sample_data

CONVERSATIONS = 60
WINDOWS = (4096, 300, 64, 12)
MINIMUM_SUPERVISED = (None, 1, 40)


class TensorCalls:
    """Counts ``torch.tensor`` calls made through the ``torch`` module upstream imported."""

    def __init__(self) -> None:
        self.calls = 0
        self.original = torch.tensor

    def __enter__(self) -> TensorCalls:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return self.original(*args, **kwargs)

        torch.tensor = counted
        return self

    def __exit__(self, *exc: object) -> None:
        torch.tensor = self.original


def rendered_rows(model: str) -> list[tuple[list[int], list[int]]]:
    rows = []
    for index, row in enumerate(sample_data.good_conversations(CONVERSATIONS, seed=5)):
        conversation = preprocessing._normalize_conversation(row["messages"])
        tools = (
            preprocessing._parse_conv_tools(json.dumps(row["tools"]), index)
            if row.get("tools")
            else None
        )
        for boundary_row in preprocessing._render_boundary_rows(
            conversation, f"local:{model}", 8192, tools=tools
        ):
            rows.append((boundary_row["input_ids"], boundary_row["loss_mask"]))
    return rows


def handed_back_cases() -> list[tuple[str, Any, Any]]:
    """Inputs the fix leaves to upstream's own function."""
    return [
        ("empty", [], []),
        ("floats", [1.0, 2.5, 3.0], [0, 1, 1]),
        ("float mask", [1, 2, 3], [0.0, 1.0, 1.0]),
        ("strings", ["1", "2"], [1, 1]),
        ("bools", [True, False], [True, True]),
        ("nested", [[1, 2], [3, 4]], [[0, 1], [1, 1]]),
        ("past int64", [2**63, 5], [1, 1]),
        ("tuples", (1, 2, 3), (0, 1, 1)),
        ("tensors", torch.arange(5), torch.tensor([0, 0, 1, 1, 1])),
        ("None inside", [1, None], [1, 1]),
    ]


def outcome(function: Any, *args: Any) -> tuple[Any, dict[str, list[Any]]]:
    results: dict[str, list[Any]] = {"input_ids": [], "loss_mask": [], "seq_len": []}
    try:
        answer: Any = function(results, *args)
    except Exception as error:  # the oracle's own error is part of its answer
        answer = f"raises {type(error).__name__}"
    return answer, results


def same_results(first: dict[str, list[Any]], second: dict[str, list[Any]]) -> bool:
    if first["seq_len"] != second["seq_len"]:
        return False
    for key in ("input_ids", "loss_mask"):
        if len(first[key]) != len(second[key]):
            return False
        for a, b in zip(first[key], second[key], strict=True):
            if (a.dtype, tuple(a.shape)) != (b.dtype, tuple(b.shape)) or not torch.equal(a, b):
                return False
    return True


def compare(model: str) -> dict[str, Any]:
    fixed = preprocessing._append_row
    upstream = inspect.unwrap(fixed)
    cases: list[tuple[str, Any, Any, int, int | None]] = []
    for number, (ids, mask) in enumerate(rendered_rows(model)):
        for window in WINDOWS:
            for minimum in MINIMUM_SUPERVISED:
                cases.append((f"row {number} window {window} min {minimum}", ids, mask, window,
                              minimum))  # fmt: skip
    for label, ids, mask in handed_back_cases():
        cases.append((label, ids, mask, 2048, None))
    differ, answers = [], {}
    fixed_calls = upstream_calls = 0
    for label, ids, mask, window, minimum in cases:
        with TensorCalls() as calls:
            expected = outcome(upstream, ids, mask, window, minimum)
        upstream_calls += calls.calls
        with TensorCalls() as calls:
            got = outcome(fixed, ids, mask, window, minimum)
        if label.startswith("row "):
            fixed_calls += calls.calls
        if got[0] != expected[0] or not same_results(got[1], expected[1]):
            differ.append(label)
        answers[expected[0]] = answers.get(expected[0], 0) + 1
    return {
        "cases": len(cases),
        "differ": differ,
        "answers": answers,
        "upstream_tensor_calls": upstream_calls,
        "fixed_tensor_calls_on_rendered_rows": fixed_calls,
    }


def main(model: str) -> None:
    logging.disable(logging.WARNING)
    states = {f.name: f.state for f in speculators_qwen_compat.status()}
    print(json.dumps({"state": states["row_tensors"], "rows": compare(model)}))


if __name__ == "__main__":
    main(sys.argv[1])
