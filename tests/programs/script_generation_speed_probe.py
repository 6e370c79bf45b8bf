"""``script_generation_speed_probe.py MODEL``: the two speed fixes of 0.5-0.7 beside upstream's
own functions as shipped (the oracles), in one interpreter with the fixes on
(test_script_generation_speed.py). Prints one JSON line.

- ``offsets_loss_mask``: ``_create_loss_mask_from_offsets`` as ``preprocessing`` now binds it and
  upstream's original (``inspect.unwrap``) on the same arguments: every conversation of the demo
  mix rendered by the model's template and tokenized with offsets at several lengths (spans cut
  by truncation), and the cases the fix leaves to upstream (no match, unsorted starts, a pattern
  whose group did not take part, no offsets). ``Tensor.__setitem__`` calls are counted: upstream
  marks one token per call.
- ``forked_tokenizer``: ``build_eagle3_dataset`` on 2 map workers, fixed and original, with the
  bytes pickled for the workers (``ForkingPickler.dumps``) summed, and the rows compared.
"""

from __future__ import annotations

import inspect
import json
import logging
import sys
from typing import Any

import datasets
import dill
import multiprocess
import torch
from multiprocess.reduction import ForkingPickler
from speculators.data_generation import preprocessing
from transformers import AutoProcessor, AutoTokenizer

import speculators_qwen_compat
from speculators_qwen_compat.data.render import forked_tokenizer, render
from speculators_qwen_compat.demo import sample_data

CONVERSATIONS = 60
LENGTHS = (None, 700, 301, 64)  # None: the whole render; the rest truncate, some mid-span


class SetItemCalls:
    """Counts ``Tensor.__setitem__`` calls: upstream's walk makes one per supervised token."""

    def __init__(self) -> None:
        self.calls = 0
        self.original = torch.Tensor.__setitem__

    def __enter__(self) -> SetItemCalls:
        def counted(tensor: torch.Tensor, *args: Any) -> Any:
            self.calls += 1
            return self.original(tensor, *args)

        torch.Tensor.__setitem__ = counted  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        torch.Tensor.__setitem__ = self.original  # type: ignore[method-assign]


class PickledBytes:
    """Sums the bytes ``multiprocess`` pickles for its workers (jobs and their arguments)."""

    def __init__(self) -> None:
        self.total = 0
        self.original = ForkingPickler.__dict__["dumps"]

    def __enter__(self) -> PickledBytes:
        dumps = self.original.__func__

        def counted(cls: type, obj: Any, *args: Any, **kwargs: Any) -> Any:
            data = dumps(cls, obj, *args, **kwargs)
            self.total += len(data)
            return data

        ForkingPickler.dumps = classmethod(counted)  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        ForkingPickler.dumps = self.original  # type: ignore[method-assign]


def mask_cases(tokenizer: Any, pattern: str) -> list[tuple[str, Any, Any]]:
    """(label, text, offsets) for every case the two functions are compared on."""
    cases = []
    for index, row in enumerate(sample_data.good_conversations(CONVERSATIONS, seed=11)):
        messages = render.arguments_as_mappings(row["messages"])  # the template reads mappings
        text = tokenizer.apply_chat_template(messages, tools=row.get("tools"), tokenize=False)
        for length in LENGTHS:
            limit = {"max_length": length, "truncation": True} if length else {}
            encoded = tokenizer(
                text, return_offsets_mapping=True, add_special_tokens=False, **limit
            )
            cases.append((f"row {index} length {length}", text, encoded["offset_mapping"]))
    text, offsets = cases[0][1], cases[0][2]
    cases += [
        ("no match", "plain text with no assistant turn", [(0, 5), (5, 10)]),
        ("unsorted starts", text, [offsets[1], offsets[0], *offsets[2:]]),
        ("no offsets", text, []),
    ]
    return cases


def compare_masks(tokenizer: Any) -> dict[str, Any]:
    pattern = preprocessing._detect_assistant_pattern(tokenizer)
    fixed = preprocessing._create_loss_mask_from_offsets
    upstream = inspect.unwrap(fixed)
    differ, supervised = [], 0
    fixed_calls = upstream_calls = 0
    cases = mask_cases(tokenizer, pattern)
    cases.append(("group not taking part", cases[0][1], cases[0][2]))
    for label, text, offsets in cases:
        # "(never)?" first: the pattern's group 1 then never takes part (its span is -1, -1)
        case_pattern = f"(never)?{pattern}" if label == "group not taking part" else pattern
        with SetItemCalls() as calls:
            expected = upstream(text, offsets, case_pattern)
        upstream_calls += calls.calls
        with SetItemCalls() as calls:
            got = fixed(text, offsets, case_pattern)
        fixed_calls += calls.calls
        same = (got.dtype, tuple(got.shape)) == (expected.dtype, tuple(expected.shape))
        if not (same and torch.equal(got, expected)):
            differ.append(label)
        supervised += int(expected.sum())
    return {
        "cases": len(cases),
        "differ": differ,
        "supervised_tokens": supervised,
        "upstream_setitem_calls": upstream_calls,
        "fixed_setitem_calls": fixed_calls,
    }


def compare_builds(tokenizer: Any) -> dict[str, Any]:
    rows = [
        row["messages"]
        for row in sample_data.good_conversations(CONVERSATIONS, seed=12)
        if all(isinstance(turn.get("content"), str) for turn in row["messages"])
    ]  # one Arrow type per column: text content only
    dataset = datasets.Dataset.from_dict({"conversations": rows})
    fixed = preprocessing.build_eagle3_dataset
    upstream = inspect.unwrap(fixed)
    outputs, sent = {}, {}
    for side, build in (("upstream", upstream), ("fixed", fixed)):
        with PickledBytes() as pickled:
            built = build(dataset, tokenizer, 512, 2)
        sent[side] = pickled.total
        built.set_format(None)
        outputs[side] = (built["input_ids"], built["loss_mask"])
    spawn_start = multiprocess.get_start_method
    forked_tokenizer._INHERITED[id(tokenizer)] = tokenizer
    try:
        multiprocess.get_start_method = lambda *args, **kwargs: "spawn"
        by_value_under_spawn = forked_tokenizer._crossing(tokenizer)[0] is not (
            forked_tokenizer._inherited
        )
    finally:
        multiprocess.get_start_method = spawn_start
        forked_tokenizer._INHERITED.pop(id(tokenizer))
    return {
        "rows": len(outputs["fixed"][0]),
        "same_rows": outputs["fixed"] == outputs["upstream"],
        "tokenizer_bytes": len(dill.dumps(tokenizer)),
        "upstream_bytes_sent": sent["upstream"],
        "fixed_bytes_sent": sent["fixed"],
        "reducer_left": type(tokenizer) in ForkingPickler._extra_reducers,
        "by_value_under_spawn": by_value_under_spawn,
        "start_method": multiprocess.get_start_method(),
    }


def main(model: str) -> None:
    logging.disable(logging.WARNING)  # upstream warns per unmatched row; not what is compared
    takes = inspect.signature(preprocessing.build_eagle3_dataset).parameters
    loader = AutoTokenizer if "tokenizer" in takes else AutoProcessor
    tokenizer = loader.from_pretrained(model)
    states = {f.name: f.state for f in speculators_qwen_compat.status()}
    report = {
        "states": {name: states[name] for name in ("offsets_loss_mask", "forked_tokenizer")},
        "masks": compare_masks(tokenizer),
        "builds": compare_builds(tokenizer),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1])
