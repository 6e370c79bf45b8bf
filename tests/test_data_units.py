"""The pieces behind issue 11 on their own, in-process and fast: finding the conversation,
the flat-data suggestion, the quality checks' thresholds, placing weight-0 turns in a mask, and
our errors' types."""

from __future__ import annotations

import pytest
from conftest import RELEASE, RENDERS
from format_corpus import formats

from speculators_qwen_compat.core.errors import CompatError, DataError, DataFileNotFoundError
from speculators_qwen_compat.data.account.quality import (
    HASH_BYTES,
    QualityStats,
    duplicate_rows,
    file_of,
    warnings,
)
from speculators_qwen_compat.data.normalize import normalize
from speculators_qwen_compat.data.normalize.normalize import normalize_row
from speculators_qwen_compat.data.read.columns import (
    ColumnOptions,
    NoConversation,
    find_conversation,
    suggest_mapping,
)
from speculators_qwen_compat.data.render.weights import (
    WeightsUnplaceable,
    assistant_ordinals,
    drop_zero_weight_rows,
    unset_matches,
    unset_runs,
)

TURNS = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]


def test_unknown_role_follows_the_installed_release() -> None:
    """Without --unknown-roles, a role outside the table goes as the installed release takes it
    (test_upstream_pins.py pins that): dropped by <= 0.7, an assistant turn on 0.8+ (model
    names in on-policy data); either way the row is kept and the event counted."""
    row = {"messages": [{"role": "user", "content": "hi"}, {"role": "Qwen3-32B", "content": "x"}]}
    got = normalize_row(row)
    how = "treated as assistant" if RENDERS else "dropped"
    assert [t["role"] for t in got.conversation] == (["user", "assistant"] if RENDERS else ["user"])
    release = ".".join(str(RELEASE).split(".")[:2])
    assert got.notes == [f"turns with role 'Qwen3-32B' {how}, as speculators {release} does"]


@pytest.mark.parametrize(
    ("row", "column"),
    [
        ({"conversations": TURNS, "messages": "ignored"}, "conversations"),
        ({"messages": TURNS}, "messages"),
        ({"conversation": TURNS, "model": "vicuna"}, "conversation"),
        ({"id": 1, "chat": '[{"role": "user", "content": "q"}]'}, "chat"),
        ({"text": "[not turns]", "turns": [{"from": "human", "value": "q"}]}, "turns"),
    ],
)
def test_the_conversation_is_found_row_by_row(row: dict, column: str) -> None:
    assert find_conversation(row, ColumnOptions())[1] == column


def test_conversations_key_wins_and_flat_mapping_builds_two_turns() -> None:
    row = {"messages": TURNS, "dialogue": TURNS[:1]}
    assert find_conversation(row, ColumnOptions("dialogue"))[1] == "dialogue"
    with pytest.raises(NoConversation, match="no 'other' column"):
        find_conversation(row, ColumnOptions("other"))
    flat = ColumnOptions.from_flags(None, "instruction, input", "output", None)
    turns, column = find_conversation({"instruction": "Do", "input": "", "output": "Done"}, flat)
    assert column == "instruction+input->output"
    assert turns == [{"role": "user", "content": "Do"}, {"role": "assistant", "content": "Done"}]
    with pytest.raises(CompatError, match="go together"):
        ColumnOptions.from_flags(None, "instruction", None, None)


@pytest.mark.parametrize(
    ("columns", "flags"),
    [
        (["instruction", "input", "output"],
         "--prompt-column instruction,input --response-column output"),
        (["id", "system_prompt", "question", "response"],
         "--prompt-column question --response-column response --system-column system_prompt"),
        (["prompt", "completion"], "--prompt-column prompt --response-column completion"),
        (["problem", "solution", "lang"], "--prompt-column problem --response-column solution"),
        (["instruction", "context", "response", "category"],
         "--prompt-column instruction,context --response-column response"),
        (["id", "text"], ""),
    ],
)  # fmt: skip
def test_flat_columns_suggest_the_mapping(columns: list[str], flags: str) -> None:
    assert suggest_mapping(columns) == flags


def _stats(replies: list[str | None], source: str = "d.jsonl") -> QualityStats:
    stats = QualityStats()
    for i, reply in enumerate(replies):
        conv = [{"role": "user", "content": f"q{i}"}]
        if reply is not None:
            conv.append({"role": "assistant", "content": reply})
        stats.add_row(f"{source}:{i + 1}", "messages", conv)
    return stats


def test_quality_thresholds() -> None:
    assert set(warnings(_stats(["OK."] * 4))) == {"placeholder_replies", "boilerplate_replies"}
    # 3 < DOMINANT_MIN: not a placeholder, but 3 of 4 replies are boilerplate
    assert set(warnings(_stats(["OK.", "OK.", "OK.", "A real answer."]))) == {"boilerplate_replies"}
    varied = [f"Answer number {i} with detail." for i in range(10)]
    assert warnings(_stats([*varied, "Sure.", "Okay!"])) == {}  # boilerplate under 30%
    assert set(warnings(_stats([*varied[:6], "Sure.", "Okay!", "Got it."]))) == {
        "boilerplate_replies"
    }
    found = warnings(_stats([None, "Fine answer here.", "Another good one."]))
    assert found["prompt_only_rows"]["details"] == [
        "d.jsonl: 1 rows without a reply (first: d.jsonl:1)"
    ]


def test_quality_merges_across_workers_and_counts_each_repeat_once() -> None:
    merged = QualityStats()
    for part in (_stats(["Same."] * 3, "a.jsonl"), _stats(["Same."] * 2, "a.jsonl")):
        merged.merge(part.to_json())
    found = warnings(merged)
    assert found["placeholder_replies"]["count"] == 5
    # row i of each worker's batch holds the same prompt and reply: 3 distinct conversations
    assert found["duplicate_conversations"]["count"] == 2
    assert file_of("x/a.jsonl:12") == file_of("x/a.jsonl[3]") == "x/a.jsonl"


def test_duplicates_across_files_are_counted_per_file_and_once_per_repeat() -> None:
    merged = QualityStats()
    # a.jsonl: X, Y, X, Z; b.jsonl: Y, W, X -> X three times, Y twice
    for file, prompts in (("a.jsonl", "XYXZ"), ("b.jsonl", "YWX")):
        stats = QualityStats()
        for line, prompt in enumerate(prompts, 1):
            turns = [{"role": "user", "content": prompt}, {"role": "assistant", "content": "A."}]
            stats.add_row(f"{file}:{line}", "messages", turns)
        merged.merge(stats.to_json())
    assert len(merged.files["a.jsonl"].hashes) == 4 * HASH_BYTES  # 8 bytes a row, no more
    copies, repeats = duplicate_rows(merged.files)
    assert copies == {"a.jsonl": 3, "b.jsonl": 2}
    assert repeats == 3  # X twice more, Y once more
    found = warnings(merged)["duplicate_conversations"]
    assert found["count"] == 3
    assert found["details"] == ["a.jsonl: 3 rows", "b.jsonl: 2 rows"]


def test_weight_zero_turns_are_unset_in_either_mask() -> None:
    conv = [{"role": "user"}, {"role": "assistant"}, {"role": "user"}, {"role": "assistant"}]
    assert assistant_ordinals(conv, [1]) == [0]
    text = "U|<a>one</a>|U|<a>two</a>"
    offsets = [(i, i + 1) for i in range(len(text))]
    mask = [0] * len(text)
    for start, end in ((5, 8), (18, 21)):
        mask[start:end] = [1] * (end - start)
    unset_matches(mask, text, offsets, r"<a>(.*?)</a>", [0], 2)
    assert [text[i] for i, m in enumerate(mask) if m] == list("two")
    with pytest.raises(WeightsUnplaceable, match="matches 2 times for 3 assistant turns"):
        unset_matches(mask, text, offsets, r"<a>(.*?)</a>", [0], 3)
    runs = [0, 1, 1, 0, 0, 1, 1, 1, 0]
    unset_runs(runs, [1], 2, clipped=False)
    assert runs == [0, 1, 1, 0, 0, 0, 0, 0, 0]
    with pytest.raises(WeightsUnplaceable):
        unset_runs([1, 0, 1, 0, 1], [0], 2, clipped=False)
    rows = [{"conv": conv[:2]}, {"conv": conv}]
    assert drop_zero_weight_rows(rows, [1]) == [{"conv": conv}]


def test_error_types_subclass_upstreams() -> None:
    assert issubclass(DataError, ValueError) and issubclass(DataError, CompatError)
    missing = DataFileNotFoundError("--data x.jsonl: no such file")
    assert isinstance(missing, FileNotFoundError) and str(missing) == "--data x.jsonl: no such file"


@pytest.mark.parametrize("policy", ["drop", "assistant"])
def test_normalising_twice_changes_nothing(policy: str) -> None:
    """The conversations fix hands upstream's per-row normaliser the turns read_batch already
    normalised back unchanged (normalize.cut_turns): that holds only if normalising them again
    gives the same turns, for every format's rows, tool-call arguments as text or as mappings."""
    from speculators_qwen_compat.data.render.render import arguments_as_mappings

    checked = 0
    for fmt in formats(renders=policy == "assistant"):
        for row in fmt.rows:
            try:
                turns = normalize.normalize_row(row, release_roles=policy).conversation
            except normalize.BadConversation:
                continue
            for given in (turns, arguments_as_mappings(turns)):
                again = normalize.normalize_conversation(given, release_roles=policy)
                assert again == given, fmt.name
                assert normalize.cut_turns(given) == given
                checked += 1
    assert checked > 50


def test_read_batch_hands_each_conversation_on_with_its_weight_zero_turns() -> None:
    """The conversations fix hands the row guard and upstream's per-row normaliser each
    conversation as a ReadConversation: normalised, carrying the indices of its weight-0
    assistant turns (here written by hand: turn 1 of the first row, none of the second)."""
    from speculators_qwen_compat.data.normalize.batch import (
        ReadConversation,
        read_batch,
        zero_weight_turns_of,
    )

    first = [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris, maybe.", "weight": 0},
        {"role": "user", "content": "Sure?"},
        {"role": "assistant", "content": "Paris.", "weight": 1},
    ]
    second = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]
    out = read_batch({"messages": [first, second]})
    conversations = out["conversations"]
    assert all(isinstance(c, ReadConversation) for c in conversations)
    assert [zero_weight_turns_of(c) for c in conversations] == [(1,), ()]
    assert [[t["content"] for t in c] for c in conversations] == [
        ["Capital of France?", "Paris, maybe.", "Sure?", "Paris."],
        ["Hi", "Hello."],
    ]
    assert zero_weight_turns_of(list(conversations[0])) == ()  # a plain list carries none
