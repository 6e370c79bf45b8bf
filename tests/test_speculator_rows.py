"""prepare_data takes what ``speculators regenerate-responses`` writes (speculator-format rows:
``id, primary_id, input_ids, loss_mask, text, metadata``) mixed with a ShareGPT file in one run:
exit 0, every usable row written with the file's values, counted like conversations (a row
with nothing supervised inside ``--seq-length`` skipped under its reason), a repeated id warned
as a duplicate. Oracles: the input file itself and, on 0.7+, upstream's own pass-through on
the speculator file alone (programs/upstream_passthrough.py, fixes off). <= 0.6 cannot train
on such rows: each is a counted skip naming that."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    FIXES_OFF,
    RELEASE,
    good_rows,
    prepare_args,
    read_report,
    run_batch,
    run_program,
    write_dataset,
)
from mask_oracle import load_rows
from packaging.version import Version

from speculators_qwen_compat.data.read import speculator_rows

SEQ_LENGTH = 512
#: 0.7+ pass speculator-format rows through (``_passthrough_pretokenized``).
PASSES_THROUGH = Version("0.7") <= RELEASE


def _boundary_row(
    tokenizer: Any, conv_id: str, index: int, prompt: list[dict[str, str]], reply: str
) -> dict[str, Any]:
    """One row as regenerate-responses 0.9.0 writes it (``_sample_from_response``: the
    prompt's token ids with loss_mask 0, then the completion's with 1)."""
    text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    prompt_ids = tokenizer.encode(text, add_special_tokens=False)
    completion = tokenizer.encode(reply, add_special_tokens=False)
    completion.append(tokenizer.convert_tokens_to_ids("<|im_end|>"))
    input_ids = [*prompt_ids, *completion]
    return {
        "id": f"{conv_id}_gen{index}",
        "primary_id": conv_id,
        "input_ids": input_ids,
        "loss_mask": [0] * len(prompt_ids) + [1] * len(completion),
        "text": tokenizer.decode(input_ids),
        "metadata": {
            "idx": index, "finish_reason": "stop", "is_tool_call": False,
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(completion)},
            "endpoint": "http://127.0.0.1:8000/v1", "sampling_params": {"temperature": 0},
        },
    }  # fmt: skip


def _speculator_file(path: Path, model: Path) -> tuple[list[dict[str, Any]], str]:
    """Rows as written (a repeated row included, as a rerun without --resume appends) and the
    id of the one whose supervised tokens all lie past SEQ_LENGTH."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model))
    rows = []
    for n in range(4):
        prompt = [{"role": "user", "content": f"What is {n} plus {n}?"}]
        rows.append(_boundary_row(tokenizer, f"conv{n}", 0, prompt, f"It is {2 * n}."))
        if n == 1:  # a second turn: the prompt holds the first reply
            prompt += [{"role": "assistant", "content": "It is 2."},
                       {"role": "user", "content": "And times three?"}]  # fmt: skip
            rows.append(_boundary_row(tokenizer, "conv1", 1, prompt, "Three."))
    long_prompt = [{"role": "user", "content": "count: " + " ".join(map(str, range(400)))}]
    too_long = _boundary_row(tokenizer, "long", 0, long_prompt, "Done counting.")
    assert too_long["loss_mask"].index(1) >= SEQ_LENGTH  # nothing supervised inside the window
    rows.append(too_long)
    rows.append(dict(rows[2]))  # appended twice
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return rows, too_long["id"]


def _pairs(rows: Any) -> Counter[str]:
    """Rows by value (0.7 stores masks as bool, as its rendered rows: True is 1)."""
    return Counter(
        json.dumps([[int(v) for v in r["input_ids"]], [int(v) for v in r["loss_mask"]]])
        for r in rows
    )


def test_regenerated_rows_mixed_with_conversations(qwen36_dir: Path, tmp_path: Path) -> None:
    sharegpt = write_dataset(tmp_path / "sharegpt.jsonl", good_rows(6), sharegpt=True)
    rows, too_long = _speculator_file(tmp_path / "regenerated.jsonl", qwen36_dir)
    output = tmp_path / "out"
    args = prepare_args(
        qwen36_dir, output, sharegpt, tmp_path / "regenerated.jsonl", seq_length=SEQ_LENGTH
    )
    mixed = run_batch(tmp_path / "logs", {"mixed": args})["mixed"]
    assert mixed.returncode == 0, mixed.stderr[-3000:]
    report = read_report(output)
    conversations = 6
    assert report["conversations_in"] == conversations + len(rows)
    skipped = sum(report["skipped"].values())
    assert report["conversations_in"] == report["conversations_kept"] + skipped
    written = _pairs(load_rows(output))
    if not PASSES_THROUGH:
        assert report["skipped"] == {speculator_rows.UNSUPPORTED: len(rows)}
        assert not any(pair in written for pair in _pairs(rows))
        return
    assert report["skipped"] == {speculator_rows.BEYOND_SEQ_LENGTH: 1}, report["skipped"]
    assert report["skipped_examples"][speculator_rows.BEYOND_SEQ_LENGTH] == [
        f"{tmp_path / 'regenerated.jsonl'}[{[r['id'] for r in rows].index(too_long)}]"
    ]
    assert report["warnings"]["duplicate_conversations"]["count"] == 1
    # the input file: every other row written once per time it is there, clipped to the window
    expected = _pairs(
        {"input_ids": r["input_ids"][:SEQ_LENGTH], "loss_mask": r["loss_mask"][:SEQ_LENGTH]}
        for r in rows
        if r["id"] != too_long
    )
    assert {pair: written[pair] for pair in expected} == expected
    assert sum(written.values()) == report["rows_out"]
    # upstream's own pass-through on the speculator file alone (0.7 also keeps the row with
    # nothing supervised in the window: counted as a skip here)
    alone = run_program(
        "upstream_passthrough", str(qwen36_dir), str(tmp_path / "regenerated.jsonl"),
        str(SEQ_LENGTH), str(tmp_path), **FIXES_OFF,
    )  # fmt: skip
    assert alone.returncode == 0, alone.stderr[-3000:]
    upstream = Counter(
        json.dumps(pair) for pair in json.loads(alone.stdout.strip().splitlines()[-1])
        if any(pair[1])
    )  # fmt: skip
    assert upstream == expected


@pytest.mark.pure
def test_mixed_parts_cast_to_one_type_values_unchanged() -> None:
    """datasets' own concatenate_datasets refuses int32 ids beside int64 ones; after the cast
    to ``aligned``'s features it accepts them, with the same values."""
    from datasets import Dataset, concatenate_datasets

    rendered = Dataset.from_dict(
        {"input_ids": [[1, 2]], "loss_mask": [[0, 1]]}, features=aligned_types("int32", "bool")
    )
    passed = Dataset.from_dict(
        {"input_ids": [[3, 2**31 - 1]], "loss_mask": [[1, 1]]},
        features=aligned_types("int64", "int64"),
    )
    with pytest.raises(ValueError, match="can't be aligned"):
        concatenate_datasets([rendered, passed])
    features = speculator_rows.aligned([rendered.features, passed.features])
    assert features == rendered.features
    joined = concatenate_datasets([rendered, passed.cast(features)])
    assert joined["input_ids"] == [[1, 2], [3, 2**31 - 1]]
    assert joined["loss_mask"] == [[False, True], [True, True]]
    assert speculator_rows.aligned([passed.features, passed.features]) is None


def aligned_types(ids: str, mask: str) -> Any:
    from datasets import Features, Sequence, Value

    return Features({"input_ids": Sequence(Value(ids)), "loss_mask": Sequence(Value(mask))})


@pytest.mark.pure
def test_unusable_rows_have_reasons() -> None:
    unusable = speculator_rows.unusable
    assert unusable([1, 2, 3], [0, 1, 1], 8) is None
    assert unusable([1, 2, 3], [0, 1], 8) == speculator_rows.LENGTHS_DIFFER
    assert unusable([1, 2], [0, 2], 8) == speculator_rows.NOT_BINARY
    assert unusable(None, [0, 1], 8) == speculator_rows.NOT_LISTS
    assert unusable([1, 2], [0, 0], 8) == speculator_rows.NOTHING_SUPERVISED
    assert unusable([1, 2, 3], [0, 0, 1], 2) == speculator_rows.BEYOND_SEQ_LENGTH
