"""What prepare_data's output must be, judged from the raw input rows, never from our code.

Nothing here imports speculators_qwen_compat. Expectations come from the rows as written in the
data file (OpenAI ``role``/``content`` or ShareGPT ``from``/``value`` turns): the strings each
turn carries, and the documented role names (docs/formats.md). The output rows are decoded
back to bytes token by token (byte-level BPE), so every token has an exact byte span, including
tokens that cover a multi-byte character or straddle an edge.

Checks, for every output row:

- it belongs to exactly one good conversation (rows and conversations are matched one to one, so
  a lost, extra or duplicated row fails): the conversation's strings as written (system, user,
  tool texts, each text part, assistant content, tool-call names and argument values, reasoning
  of assistant turns after the last user turn) appear in order, each in a block of its kind
  (``<|im_start|>ROLE\\n ... <|im_end|>``), with as many assistant blocks as assistant turns;
- every token's mask bit, straddling tokens included:
  <= 0.7, upstream's regex (``regex``): 1 exactly for tokens overlapping an assistant block's
  body (after ``<|im_start|>assistant\\n``, before ``<|im_end|>``); with a template's
  ``{% generation %}`` tags (``generation``) the closing ``<|im_end|>`` is part of the span;
  0.8+, render boundaries (``boundary``): one row per assistant turn (not the first turn) with its
  history; the mask is 0s then 1s, the 1s starting where the ids of (the row's text before the
  last assistant body + the template's generation prompt) stop matching the row's ids, as
  upstream's token-prefix comparison does;
- tokens overlapping a supervised turn's strings are 1, tokens overlapping context strings are 0.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

OPEN = b"<|im_start|>"
CLOSE = b"<|im_end|>"
ASSISTANT_OPEN = b"<|im_start|>assistant\n"
#: Role names as written in the data, and the role each stands for (docs/formats.md).
ROLES = {
    **dict.fromkeys(("system", "developer"), "system"),
    **dict.fromkeys(("user", "human"), "user"),
    **dict.fromkeys(("assistant", "gpt", "model", "bot", "chatgpt", "function_call"), "assistant"),
    **dict.fromkeys(
        ("tool", "function", "observation", "ipython", "tool_response", "function_response"),
        "tool",
    ),
}
REASONING_KEYS = ("reasoning_content", "thinking", "reasoning")


def load_rows(output: Path) -> list[dict[str, list[int]]]:
    from datasets import load_from_disk

    dataset = load_from_disk(str(output)).with_format(None)
    return [{"input_ids": list(r["input_ids"]), "loss_mask": list(r["loss_mask"])} for r in dataset]


# ---------------------------------------------------------------- the raw rows, as written


def _turns(row: dict[str, Any]) -> list[dict[str, Any]]:
    conv = row.get("messages")
    if conv is None:
        conv = row.get("conversations")
    return conv


def _role(turn: dict[str, Any], renders: bool) -> str | None:
    """The role a turn stands for; a role outside the table follows the release (docs/formats.md):
    dropped on <= 0.7 (None), an assistant turn on 0.8+."""
    raw = turn.get("from") if turn.get("from") is not None else turn.get("role")
    return ROLES.get(str(raw).strip().lower(), "assistant" if renders else None)


def _texts(content: Any) -> list[str]:
    """The text a turn's content carries, as written: a string, or each text part of a list."""
    if isinstance(content, str):
        return [content]
    texts = []
    for part in content or []:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return texts


def _call_strings(call: dict[str, Any]) -> list[str]:
    function = call.get("function", call)
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        arguments = json.loads(arguments)
    values = [v if isinstance(v, str) else json.dumps(v) for v in (arguments or {}).values()]
    return [function["name"], *values]


def _assistant_strings(turn: dict[str, Any], with_reasoning: bool) -> list[str]:
    value = turn.get("value") if turn.get("value") is not None else turn.get("content")
    if str(turn.get("from", turn.get("role"))) == "function_call":  # the value is the call
        return _call_strings(json.loads(value))
    strings = []
    reasoning = next((turn[k] for k in REASONING_KEYS if turn.get(k)), None)
    if with_reasoning and reasoning:
        strings.append(reasoning)
    strings += _texts(value)
    for call in turn.get("tool_calls") or []:
        strings += _call_strings(call)
    return strings


def _conversation(row: dict[str, Any], renders: bool) -> list[tuple[str, list[bytes]]]:
    """(role, [the turn's strings as UTF-8, trimmed, non-empty]) per rendered turn."""
    turns = [t for t in _turns(row) if _role(t, renders)]
    roles = [_role(t, renders) for t in turns]
    last_user = max((i for i, r in enumerate(roles) if r == "user"), default=-1)
    out = []
    for index, (turn, role) in enumerate(zip(turns, roles, strict=True)):
        if role == "assistant":
            strings = _assistant_strings(turn, with_reasoning=index > last_user)
        else:
            value = turn.get("value") if turn.get("value") is not None else turn.get("content")
            strings = _texts(value)
        out.append((role, [s.strip().encode() for s in strings if s.strip()]))
    return out


Conversation = list[tuple[str, list[bytes]]]
#: One expected output row: the turns it renders and the tool descriptions its system block shows.
Entry = tuple[Conversation, list[bytes]]


def _tool_strings(row: dict[str, Any], with_tools: bool) -> list[bytes]:
    tools = row.get("tools") if with_tools else None
    if isinstance(tools, str):
        tools = json.loads(tools)
    functions = [tool.get("function", tool) for tool in tools or []]
    return [f.get("description", f["name"]).encode() for f in functions]


def _entries(row: dict[str, Any], renders: bool, with_tools: bool) -> list[Entry]:
    """The conversation prefixes prepare_data must write one row each for: <= 0.7 the whole
    conversation, 0.8+ each assistant turn but a leading one, with its history."""
    tools = _tool_strings(row, with_tools)
    if not renders:
        return [(_conversation(row, renders), tools)]
    turns = _turns(row)
    return [
        (_conversation({"messages": turns[: j + 1]}, renders), tools)  # reasoning: prefix's
        for j, turn in enumerate(turns)
        if j > 0 and _role(turn, renders) == "assistant"
    ]


def expected_row_count(rows: Iterable[dict[str, Any]], renders: bool) -> int:
    return sum(len(_entries(row, renders, False)) for row in rows)


# ---------------------------------------------------------------- the output rows, decoded


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """The byte-level BPE alphabet (printable bytes stand for themselves, the others are
    shifted to 256+), inverted."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return {c: b for b, c in chars.items()}


class Decoder:
    """Token ids -> bytes with each token's byte span, from the tokenizer's vocabulary."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.added = {i: t.content.encode() for i, t in tokenizer.added_tokens_decoder.items()}
        self.decoder = _byte_decoder()

    def decode(self, ids: list[int]) -> tuple[bytes, list[tuple[int, int]]]:
        pieces = self.tokenizer.convert_ids_to_tokens(ids)
        out, spans = bytearray(), []
        for token_id, piece in zip(ids, pieces, strict=True):
            raw = self.added.get(token_id)
            if raw is None:
                raw = bytes(self.decoder[c] for c in piece)
            spans.append((len(out), len(out) + len(raw)))
            out += raw
        return bytes(out), spans


def _blocks(text: bytes) -> list[tuple[str, int, int]]:
    """(role, body start, body end) per ChatML block; an unclosed last block runs to the end."""
    blocks, start = [], text.find(OPEN)
    while start >= 0:
        header_end = text.find(b"\n", start)
        header_end = len(text) if header_end < 0 else header_end
        role = text[start + len(OPEN) : header_end].decode(errors="replace")
        begin = min(header_end + 1, len(text))
        end = text.find(CLOSE, begin)
        end = len(text) if end < 0 else end
        blocks.append((role, begin, end))
        start = text.find(OPEN, end)
    return blocks


def _locate(
    text: bytes, blocks: list[tuple[str, int, int]], entry: Entry
) -> list[tuple[int, int, int]] | None:
    """Find each turn's strings in order, each in a block of its kind: [(turn, start, end)], or
    None when the row is not this conversation. System strings sit in system blocks, user and
    tool strings in the other non-assistant blocks (a template may merge tool results into a
    user block), each assistant turn's strings in its own assistant block; tool descriptions
    in a system block."""
    conv, tools = entry
    systems = [(b, e) for kind, b, e in blocks if kind == "system"]
    if not all(any(text.find(t, b, e) >= 0 for b, e in systems) for t in tools):
        return None
    if sum(kind == "assistant" for kind, _, _ in blocks) != sum(r == "assistant" for r, _ in conv):
        return None
    found: list[tuple[int, int, int]] = []
    used: set[int] = set()
    block, pos = 0, 0
    for turn, (role, strings) in enumerate(conv):
        if role == "assistant":
            while block < len(blocks) and blocks[block][0] != "assistant":
                block += 1
            if block == len(blocks):
                return None
            _, pos, end = blocks[block]
            for s in strings:
                at = text.find(s, pos, end)
                if at < 0:
                    return None
                found.append((turn, at, at + len(s)))
                pos = at + len(s)
            used.add(block)
            block, pos = block + 1, 0
            continue
        for s in strings:
            while True:
                if block == len(blocks) or blocks[block][0] == "assistant":
                    return None
                kind, begin, end = blocks[block]
                at = -1
                if (kind == "system") == (role == "system"):
                    at = text.find(s, max(pos, begin), end)
                if at >= 0:
                    found.append((turn, at, at + len(s)))
                    used.add(block)
                    pos = at + len(s)
                    break
                block, pos = block + 1, 0
    has_system = any(role == "system" for role, _ in conv)
    for index, (kind, begin, end) in enumerate(blocks):
        if index in used or not text[begin:end].strip():
            continue
        if kind != "system" or has_system or not tools:
            return None  # a block this conversation does not account for
    return found


# ---------------------------------------------------------------- masks


def _overlaps(span: tuple[int, int], regions: list[tuple[int, int]]) -> bool:
    start, end = span
    return any(start < e and s < end for s, e in regions)


def _expected_mask(
    text: bytes, spans: list[tuple[int, int]], ids: list[int], mode: str, oracle: Oracle
) -> list[int]:
    blocks = [(b, e) for role, b, e in _blocks(text) if role == "assistant"]
    if mode == "boundary":
        body = blocks[-1][0]
        prompt = text[:body].decode() + oracle.generation_prompt
        prompt_ids = oracle.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        boundary = 0
        while boundary < min(len(ids), len(prompt_ids)) and ids[boundary] == prompt_ids[boundary]:
            boundary += 1
        return [0] * boundary + [1] * (len(ids) - boundary)
    if mode == "generation":
        blocks = [(b, e + len(CLOSE) if text.startswith(CLOSE, e) else e) for b, e in blocks]
    return [int(_overlaps(span, blocks)) for span in spans]


class Oracle:
    """The expectations for one model folder (its tokenizer and template) and mask mode."""

    def __init__(
        self,
        model: Path | str,
        renders: bool,
        generation_tags: bool = False,
        with_tools: bool = False,
    ) -> None:
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(model))
        self.renders = renders
        self.with_tools = with_tools
        self.mode = "boundary" if renders else ("generation" if generation_tags else "regex")
        self.decoder = Decoder(self.tokenizer)
        probe = [{"role": "user", "content": "x"}]
        plain = self.tokenizer.apply_chat_template(probe, tokenize=False)
        full = self.tokenizer.apply_chat_template(probe, tokenize=False, add_generation_prompt=True)
        assert full.startswith(plain) and full[len(plain) :].startswith(ASSISTANT_OPEN.decode())
        #: What the template adds after ``<|im_start|>assistant\n`` as the generation prompt.
        self.generation_prompt = full[len(plain) + len(ASSISTANT_OPEN) :]

    def check(self, output_rows: list[dict[str, Any]], rows: list[dict[str, Any]]) -> None:
        """Every output row matches one expected row of ``rows`` (the good rows as written) with
        the right mask, and every expected row is there."""
        entries = [e for row in rows for e in _entries(row, self.renders, self.with_tools)]
        decoded = [self.decoder.decode(r["input_ids"]) for r in output_rows]
        fits: list[dict[int, list[tuple[int, int, int]]]] = []
        for text, _ in decoded:
            blocks = _blocks(text)
            located = ((k, _locate(text, blocks, e)) for k, e in enumerate(entries))
            fits.append({k: f for k, f in located if f is not None})
        pairing = _match([set(f) for f in fits], len(entries))
        unmatched_rows = [i for i, k in enumerate(pairing) if k is None]
        assert not unmatched_rows, (
            f"{len(unmatched_rows)} output rows match no good conversation, e.g. "
            f"{decoded[unmatched_rows[0]][0][:600]!r}"
        )
        missing = len(entries) - len(output_rows)
        assert missing == 0, f"{missing} expected rows missing ({len(entries)} expected)"
        for index, (row, (text, spans)) in enumerate(zip(output_rows, decoded, strict=True)):
            mask, ids = list(row["loss_mask"]), row["input_ids"]
            want = _expected_mask(text, spans, ids, self.mode, self)
            bad = [i for i, (m, w) in enumerate(zip(mask, want, strict=True)) if m != w]
            assert not bad, _mask_error(text, spans, mask, bad)
            entry = pairing[index]
            self._check_strings(mask, spans, fits[index][entry], entries[entry][0])

    def _check_strings(
        self,
        mask: list[int],
        spans: list[tuple[int, int]],
        found: list[tuple[int, int, int]],
        conv: list[tuple[str, list[bytes]]],
    ) -> None:
        last = len(conv) - 1
        for turn, start, end in found:
            role = conv[turn][0]
            supervised = role == "assistant" and (not self.renders or turn == last)
            bits = {
                m for m, span in zip(mask, spans, strict=True) if _overlaps(span, [(start, end)])
            }
            assert bits <= {int(supervised)} and bits, (
                f"{role} turn {turn}: string at bytes {start}-{end} has mask bits {bits}"
            )


def _mask_error(text: bytes, spans: list[tuple[int, int]], mask: list[int], bad: list[int]) -> str:
    i = bad[0]
    s, e = spans[i]
    return (
        f"{len(bad)} tokens with the wrong mask bit; first: token {i} {text[s:e]!r} is {mask[i]} "
        f"after {text[max(0, s - 80) : s]!r}"
    )


def _match(fits: list[set[int]], entries: int) -> list[int | None]:
    """A one-to-one pairing of output rows with expected entries (augmenting paths)."""
    owner: dict[int, int] = {}

    def assign(row: int, seen: set[int]) -> bool:
        for entry in fits[row]:
            if entry in seen:
                continue
            seen.add(entry)
            if entry not in owner or assign(owner[entry], seen):
                owner[entry] = row
                return True
        return False

    for row in range(len(fits)):
        assign(row, set())
    pairing: list[int | None] = [None] * len(fits)
    for entry, row in owner.items():
        pairing[row] = entry
    return pairing


def check_masks(
    model: Path | str,
    output_rows: list[dict[str, Any]],
    rows: list[dict[str, Any]],
    renders: bool,
    generation_tags: bool = False,
    with_tools: bool = False,
) -> int:
    """Check the output against the good raw rows; returns the number of rows expected.
    ``with_tools``: the release passes a row's ``tools`` column to the template (0.7+)."""
    Oracle(model, renders, generation_tags, with_tools).check(output_rows, rows)
    return expected_row_count(rows, renders)


def message_signatures(rows: Iterable[dict[str, Any]], renders: bool) -> Counter:
    """What upstream's ``messages`` column must hold for the good rows as written, one entry
    per output row: per turn, the role it stands for and its text strings (trimmed, non-empty)."""
    out: Counter = Counter()
    for row in rows:
        turns = [t for t in _turns(row) if _role(t, renders)]
        ends = [j + 1 for j, t in enumerate(turns) if j > 0 and _role(t, renders) == "assistant"]
        for end in ends if renders else [len(turns)]:
            out[_signature([(_role(t, renders), _value(t)) for t in turns[:end]])] += 1
    return out


def column_signatures(messages: Iterable[list[dict[str, Any]]]) -> Counter:
    """The same signature of each entry of an output ``messages`` column."""
    return Counter(_signature([(t["role"], t.get("content")) for t in conv]) for conv in messages)


def _value(turn: dict[str, Any]) -> Any:
    return turn.get("value") if turn.get("value") is not None else turn.get("content")


def _signature(turns: list[tuple[str, Any]]) -> tuple:
    return tuple((role, tuple(s.strip() for s in _texts(c) if s.strip())) for role, c in turns)
