"""What regenerate-responses plans for a row before any request (regenerate/plan.py): one step
per user turn, the data's tool results named by the tool they answer, results before any call
kept as context, and a refused first prompt named by the target's own template
(``Plan.check``: the demo's strict Qwen3.6-style one, rendered by transformers)."""

from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer

from speculators_qwen_compat.data.normalize.normalize import BadConversation
from speculators_qwen_compat.regenerate.plan import plan_row

pytestmark = pytest.mark.pure


def call(call_id: str, name: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def test_results_are_named_by_id_name_payload_or_their_call() -> None:
    row = {
        "messages": [
            {"role": "user", "content": "q"},
            # two calls answered out of order: tool_call_id decides, not position
            {"role": "assistant", "content": "", "tool_calls": [call("a", "search"),
                                                               call("b", "get_weather")]},
            {"role": "tool", "tool_call_id": "b", "content": "W"},
            {"role": "tool", "tool_call_id": "a", "content": "S"},
            {"role": "assistant", "content": "", "tool_calls": [call("c", "lookup")]},
            {"role": "tool", "content": "no id: answers the call waiting"},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "again"},
            {"role": "assistant", "content": "<tool_call>...</tool_call>"},  # Hermes text
            {"role": "tool", "content": '<tool_response>{"name": "clock", "t": 1}</tool_response>'},
        ]
    }  # fmt: skip
    plan, _ = plan_row(row)
    assert [(r.name, r.content) for r in plan[0].results] == [
        ("get_weather", "W"), ("search", "S"), ("lookup", "no id: answers the call waiting"),
    ]  # fmt: skip
    assert [r.name for r in plan[1].results] == ["clock"]
    assert [m["role"] for m in plan[1].lead] == ["user"]


def test_a_result_before_the_question_is_context_and_roles_follow_the_table() -> None:
    row = {
        "conversations": [
            {"from": "observation", "value": "early"},
            {"from": "developer", "value": "be brief"},
            {"from": "human", "value": "q"},
            {"from": "function_call", "value": json.dumps({"name": "f", "arguments": {"x": 1}})},
            {"from": "observation", "value": "late"},
        ]
    }
    plan, _ = plan_row(row)
    assert len(plan) == 1
    assert [(m["role"], m["content"]) for m in plan[0].lead] == [
        ("tool", "early"), ("system", "be brief"), ("user", "q"),
    ]  # fmt: skip
    assert [(r.name, r.content) for r in plan[0].results] == [("f", "late")]


@pytest.mark.parametrize(
    ("messages", "reason"),
    [
        ([{"role": "assistant", "content": "hi"}], "no user turn"),
        ([], "conversation is empty or not a list"),
        ([{"content": "hi"}], "turn without a role"),
    ],
)
def test_rows_without_a_question_are_skipped_with_a_reason(messages: list, reason: str) -> None:
    with pytest.raises(BadConversation, match=reason):
        plan_row({"messages": messages})


def test_the_template_names_a_refused_first_prompt(qwen36_dir) -> None:
    tokenizer = AutoTokenizer.from_pretrained(qwen36_dir)
    row = {
        "messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "a"},
            {"role": "system", "content": "late"},
            {"role": "user", "content": "second"},
        ]
    }
    plan, _ = plan_row(row, tokenizer=tokenizer)
    assert plan.check() is None  # the first prompt renders; the second is the server's
    assert len(plan) == 2
    late_first = [{"role": "user", "content": "q"}, {"role": "system", "content": "late"}]
    plan, _ = plan_row({"messages": late_first}, tokenizer=tokenizer)
    assert plan.check() == "System message must be at the beginning."


def test_an_image_conversation_is_judged_by_its_text_in_a_venv_without_pillow(
    qwen36_dir, tmp_path, monkeypatch
) -> None:
    """Regeneration needs no Pillow or image processor (the server reads the images): with
    Pillow made unimportable and an image file that is not one, the template check renders
    the image part as the template's placeholder: no words on a good first prompt, the
    template's words on a bad one (once it was counted an error)."""
    import shutil
    import sys

    monkeypatch.setitem(sys.modules, "PIL", None)  # `from PIL import Image` raises ImportError
    target = shutil.copytree(qwen36_dir, tmp_path / "target")  # a vision-language target's
    config = (
        json.loads((target / "config.json").read_text())
        if (target / "config.json").exists()
        else {}
    )
    (target / "config.json").write_text(json.dumps({**config, "vision_config": {}}))
    tokenizer = AutoTokenizer.from_pretrained(target)
    image = tmp_path / "cat.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n")
    row = {
        "messages": [
            {"role": "user", "content": [
                {"type": "image", "image": str(image)}, {"type": "text", "text": "What is it?"}]},
            {"role": "assistant", "content": "OK."},
            {"role": "user", "content": "And then?"},
        ]
    }  # fmt: skip
    plan, _ = plan_row(row, tokenizer=tokenizer)
    assert plan.check() is None
    assert len(plan) == 2 and plan.pending is None
    late = {"messages": [*row["messages"][:1], {"role": "system", "content": "late"}]}
    plan, _ = plan_row(late, tokenizer=tokenizer)
    assert plan.check() == "System message must be at the beginning."
