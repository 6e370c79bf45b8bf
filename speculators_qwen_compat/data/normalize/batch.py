"""A map batch read into the conversations upstream's batch function takes (``read_batch``), each a
``ReadConversation`` that carries what the row guard needs with the row itself, in upstream's own
arguments: every map worker, every batch it ends up in, the same hand-over."""

from __future__ import annotations

import json
from typing import Any

from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.core.upstream import batch_length
from speculators_qwen_compat.data.account import ledger
from speculators_qwen_compat.data.normalize import processor_media
from speculators_qwen_compat.data.normalize.normalize import BadConversation, normalize_row
from speculators_qwen_compat.data.read.columns import ColumnOptions
from speculators_qwen_compat.data.read.files import LINE_COLUMN, SOURCE_COLUMN
from speculators_qwen_compat.data.read.unreadable import (
    INVALID_UNICODE,
    MALFORMED_LINE,
    NOT_AN_OBJECT,
)
from speculators_qwen_compat.data.render.render import arguments_as_mappings

#: The two upstream generations (route/render.py, route/script.py): 0.8+ render through vLLM's
#: request handling, <= 0.7 apply the template in their git-only script.
RENDER, SCRIPT = "render", "script"


class ReadConversation(list[dict[str, Any]]):
    """One conversation as the conversations stage at ``_preprocess_batch`` hands it on, in
    place of the row upstream read: its turns normalised (data/normalize/normalize.py), with
    ``zero_weight_turns``, the indices of its assistant turns of weight 0.

    Why a type and not a column or a table: upstream's ``_preprocess_batch`` passes each
    conversation object unchanged to the calls our inner stages wrap (``_normalize_conversation``
    on every release, ``_render_conversation_rows`` on 0.8+) and the row guard splits batches
    by slicing their lists, so what the conversation carries reaches every stop of its row, in
    any map worker, whatever batch it ends up in. Upstream's per-row ``_normalize_conversation``
    sees by this type that the turns are normalised already (only <= 0.6's dropout is left,
    normalize.py ``cut_turns``: a plain list goes on); the row guard reads ``zero_weight_turns``
    to keep those turns out of the loss mask (data/render/weights.py)."""

    __slots__ = ("weights_read", "zero_weight_turns")

    def __init__(self, turns: list[dict[str, Any]], zero_weight_turns: list[int]) -> None:
        super().__init__(turns)
        self.zero_weight_turns: tuple[int, ...] = tuple(zero_weight_turns)
        #: set when the row guard reads ``zero_weight_turns`` (``zero_weight_turns_of``): the
        #: conversations stage checks it after upstream's batch, so a hand-over that did not
        #: arrive is loud
        self.weights_read = False


def zero_weight_turns_of(conversation: Any) -> tuple[int, ...]:
    """The weight-0 assistant turns ``conversation`` carries (``ReadConversation``); none for
    any other (a conversation our reader did not read)."""
    if not isinstance(conversation, ReadConversation):
        return ()
    conversation.weights_read = True
    return conversation.zero_weight_turns


def refuse_unread_weights(conversations: list[Any]) -> None:
    """Fail when some of ``conversations`` carry weight-0 turns the row guard never read (it is
    off, failed, or a release copied the conversation on the way): they would be trained on."""
    unread = sum(
        isinstance(c, ReadConversation) and bool(c.zero_weight_turns) and not c.weights_read
        for c in conversations
    )
    if unread:
        raise CompatError(
            f"{unread} conversation(s) have assistant turns marked weight 0 (or "
            "train: false) that the row guard never received, so they would be "
            "trained on: the row_guard fix is off or did not apply (run "
            "`python -m speculators_qwen_compat status`); switch it on, or drop "
            "the weights from the data if those turns should be trained"
        )


def read_batch(
    examples: dict[str, list[Any]],
    generation: str = RENDER,
    release_roles: str | None = None,
    multimodal: bool | None = None,
) -> dict[str, list[Any]]:
    """Parse and normalise every row of a batch; unreadable rows are counted and left out.

    ``generation``: the installed release's upstream generation (route/): in ``script`` the
    release applies the template itself (<= 0.7), so tool-call arguments are handed to it as
    mappings (render.py ``arguments_as_mappings``). ``release_roles``: what the installed
    release does with an unknown role (normalize.py ``unknown_role_policy``). ``multimodal``:
    in ``script``, whether the release loaded the target's processor
    (True) or a tokenizer (False): image/video parts are prepared for it or the row is skipped
    (data/normalize/processor_media.py); None leaves them to the release (0.8+ render them).
    Media in every form (parts, image columns) reach every release in the form upstream's
    adapter takes (data/normalize/media_forms.py, through the normaliser).

    Returns the columns upstream reads: ``conversations`` (each a ``ReadConversation``,
    carrying the indices of its weight-0 assistant turns for the row guard), ``tools`` when
    any row has tools, and the ``file:line`` source of each row kept.
    """
    options = ColumnOptions.of_this_run()
    lines = examples.get(LINE_COLUMN)
    sources = examples.get(SOURCE_COLUMN)
    columns = [k for k in examples if k not in (LINE_COLUMN, SOURCE_COLUMN)]
    out: dict[str, list[Any]] = {
        "conversations": [],
        "tools": [],
        SOURCE_COLUMN: [],
    }
    quality = ledger.quality()
    for i in range(batch_length(examples)):
        where = sources[i] if sources else f"row {i} of its batch"
        try:
            if lines is not None:
                row = _json_row(lines[i])
            else:
                row = {name: examples[name][i] for name in columns}
            source = sources[i] if sources else None
            normalized = normalize_row(row, options, release_roles, source)
            conversation = normalized.conversation  # media parts in upstream's form already
            if lines is not None and "\\ud" in lines[i].lower():
                _refuse_lone_surrogates(conversation, normalized.tools)
            if multimodal is not None:
                conversation = processor_media.for_processor(conversation, multimodal)
        except BadConversation as exc:
            ledger.skip(str(exc), f"{where} ({exc.detail})" if exc.detail else where)
            continue
        for text in normalized.notes:
            ledger.note(text)
        quality.add_row(
            where if sources else "(dataset)",
            normalized.column,
            normalized.conversation,
            normalized.tools,
            normalized.zero_weight_turns,
            lines[i] if lines is not None else None,
        )
        if generation == SCRIPT:
            conversation = arguments_as_mappings(conversation)
        out["conversations"].append(ReadConversation(conversation, normalized.zero_weight_turns))
        out["tools"].append(normalized.tools)
        out[SOURCE_COLUMN].append(where)
    if not any(out["tools"]):
        del out["tools"]
    return out


def _json_row(line: str) -> dict[str, Any]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        raise BadConversation(MALFORMED_LINE) from None
    if not isinstance(row, dict):
        raise BadConversation(NOT_AN_OBJECT)
    return row


def _refuse_lone_surrogates(conversation: list[dict[str, Any]], tools: Any) -> None:
    """What reaches the template (the turns, tool-call arguments held as JSON text parsed as
    the template gets them, the tools) holds no lone surrogate; columns and keys the
    normaliser leaves out do not count."""
    try:
        json.dumps([arguments_as_mappings(conversation), tools], ensure_ascii=False).encode()
    except UnicodeEncodeError:
        raise BadConversation(INVALID_UNICODE) from None
