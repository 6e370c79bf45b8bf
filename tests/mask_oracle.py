"""What prepare_data's output must be, computed independently of speculators.

<= 0.7 (one row per conversation): every token inside an assistant block (after
``<|im_start|>assistant\\n``, before its ``<|im_end|>``) is supervised, no other token is.
0.8+ (one row per assistant turn with context): the mask is 0...0 1...1; nothing before the
turn's ``<|im_start|>assistant\\n`` is supervised, everything from its content on is.
Rows are matched to conversations by their token ids, so a lost or extra row is caught too.
``close_supervised``: on <= 0.7 a template with ``{% generation %}`` tags around the turn and
its ``<|im_end|>`` (demo gallery ``generation_tags``) gets transformers' assistant mask, which
supervises that ``<|im_end|>`` too; the newline after it stays unsupervised.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from speculators_qwen_compat.data.normalize import normalize_conversation

OPEN = "<|im_start|>assistant\n"
CLOSE = "<|im_end|>"
THINK_END = "</think>\n\n"


def load_rows(output: Path) -> list[dict[str, list[int]]]:
    from datasets import load_from_disk

    dataset = load_from_disk(str(output)).with_format(None)
    return [{"input_ids": list(r["input_ids"]), "loss_mask": list(r["loss_mask"])} for r in dataset]


def _render(tokenizer: Any, conv: list[dict], tools: Any) -> str:
    return tokenizer.apply_chat_template(conv, tools=tools, tokenize=False)


def _encode(tokenizer: Any, text: str, limit: int) -> tuple[list[int], list[tuple[int, int]]]:
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return enc["input_ids"][:limit], enc["offset_mapping"][:limit]


def expected_rows(
    tokenizer: Any, rows: list[dict[str, Any]], renders: bool, with_tools: bool, limit: int
) -> list[dict[str, Any]]:
    """One entry per output row prepare_data must write: ids, offsets and the text."""
    expected = []
    for row in rows:
        conv = normalize_conversation(row.get("messages") or row.get("conversations"))
        if renders:
            conv = [_vllm_string_content(turn) for turn in conv]
        tools = row.get("tools") if with_tools else None
        prefixes = (
            [conv[: j + 1] for j, t in enumerate(conv) if t["role"] == "assistant" and j > 0]
            if renders
            else [conv]
        )
        for prefix in prefixes:
            text = _render(tokenizer, prefix, tools)
            ids, offsets = _encode(tokenizer, text, limit)
            expected.append({"ids": ids, "offsets": offsets, "text": text})
    return expected


def _vllm_string_content(turn: dict[str, Any]) -> dict[str, Any]:
    """vLLM hands text-parts content to templates that do not loop over content (all the test
    templates) as one string, the texts joined by newlines."""
    content = turn["content"]
    if isinstance(content, list) and all(part.get("type") == "text" for part in content):
        return {**turn, "content": "\n".join(part["text"] for part in content)}
    return turn


def check_masks(
    output_rows: list[dict], expected: list[dict], renders: bool, close_supervised: bool = False
) -> None:
    by_ids = {tuple(e["ids"]): e for e in expected}
    got = Counter(tuple(r["input_ids"]) for r in output_rows)
    want = Counter(tuple(e["ids"]) for e in expected)
    assert got == want, f"rows differ: {sum((want - got).values())} missing, " + (
        f"{sum((got - want).values())} unexpected"
    )
    for row in output_rows:
        e = by_ids[tuple(row["input_ids"])]
        if renders:
            _check_turn_mask(row["loss_mask"], e["offsets"], e["text"])
        else:
            _check_conversation_mask(row["loss_mask"], e["offsets"], e["text"], close_supervised)


def _assistant_spans(text: str, close_supervised: bool = False) -> list[tuple[int, int]]:
    spans, start = [], text.find(OPEN)
    while start >= 0:
        begin = start + len(OPEN)
        end = text.find(CLOSE, begin)
        end = end if end >= 0 else len(text)
        if close_supervised and text.startswith(CLOSE, end):
            end += len(CLOSE)
        spans.append((begin, end))
        start = text.find(OPEN, begin)
    return spans


def _check_conversation_mask(
    mask: list[int], offsets: list, text: str, close_supervised: bool = False
) -> None:
    spans = _assistant_spans(text, close_supervised)
    assert spans, "a kept row has no assistant turn"
    for i, (start, end) in enumerate(offsets):
        inside = any(s <= start and end <= e for s, e in spans)
        outside = all(end <= s or start >= e for s, e in spans)
        if inside and end > start:
            assert mask[i] == 1, f"assistant token {text[start:end]!r} not supervised"
        if outside:
            assert mask[i] == 0, f"non-assistant token {text[start:end]!r} supervised"


def _check_turn_mask(mask: list[int], offsets: list, text: str) -> None:
    boundary = mask.index(1)
    assert all(m == 1 for m in mask[boundary:]), "supervised tokens are not one final run"
    turn = text.rfind(OPEN)
    content = turn + len(OPEN)
    think_end = text.find(THINK_END, content)
    if think_end >= 0:
        content = think_end + len(THINK_END)
    for i, (start, end) in enumerate(offsets):
        if end <= turn:
            assert mask[i] == 0, f"context token {text[start:end]!r} supervised"
        if start >= content:
            assert mask[i] == 1, f"turn token {text[start:end]!r} not supervised"
