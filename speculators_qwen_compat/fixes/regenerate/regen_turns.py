"""Fix: every conversation regenerate-responses reads is planned or skipped with a reason.

Targets: ``prepare_row`` (regenerate/plan.py), ``build_detokenizer`` (``review_decoder``: the
same text, less CPU), ``load_input_dataset`` (regenerate/lines.py): upstream drops rows uncounted
(docs/upstream.md, "Regenerate responses"). The normaliser's skips come before any request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from speculators_qwen_compat.core.fix import Fix, Patcher
from speculators_qwen_compat.core.targets import ANY, ReleaseRange, Resolved, Shape, Target
from speculators_qwen_compat.core.upstream import CLI_REGENERATE, arguments, bind
from speculators_qwen_compat.data.normalize.normalize import BadConversation
from speculators_qwen_compat.regenerate import resume_keys
from speculators_qwen_compat.regenerate import state as regen_state
from speculators_qwen_compat.regenerate.lines import JsonLines, is_json_lines
from speculators_qwen_compat.regenerate.plan import plan_row

PREPARE_ROW = Target(CLI_REGENERATE, "prepare_row", params=("row", "config"))
DETOKENIZER = Target(CLI_REGENERATE, "build_detokenizer", params=("model",))
PRIMARY_ID = Target(CLI_REGENERATE, "_primary_identifier", params=("row",))
RESULT_NAMES = Target(CLI_REGENERATE, "_tool_result_names", params=("content",))
LOAD = Target(CLI_REGENERATE, "load_input_dataset", params=("dataset_name", "split", "subset"))
PRESETS = Target(CLI_REGENERATE, "REGEN_DATASETS", kind=ANY, optional=True)
PRESET_FILTER = "left out by the dataset preset's filter"


class RegenTurnsFix(Fix):
    name = "regen_turns"
    summary = "regenerate-responses: normalise each row, judge what is sent, count every skip"
    modules = (CLI_REGENERATE,)
    shapes = (
        Shape(
            "prepare_row normalises and counts",
            (PREPARE_ROW, DETOKENIZER, PRIMARY_ID, RESULT_NAMES, LOAD, PRESETS),
        ),
    )
    applies_on = ReleaseRange("0.8.1", "0.9.0")

    def apply(self, found: Resolved, patcher: Patcher) -> None:
        primary_id = found.get(PRIMARY_ID)
        module = found.module

        def prepare_row(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            given = arguments(wrapped, args, kwargs)  # once per row: no inspect
            names = module._tool_result_names  # looked up per call: another fix may wrap it
            return _prepare_row(given["row"], given["config"], primary_id, names)

        patcher.wrap(*found.owner_and_name(PREPARE_ROW), prepare_row)
        patcher.wrap(*found.owner_and_name(DETOKENIZER), _build_detokenizer)
        presets = found.get(PRESETS) or ()

        def load(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            return _load_lines(wrapped, args, kwargs, presets, primary_id)

        patcher.wrap(*found.owner_and_name(LOAD), load)


def _load_lines(wrapped: Any, args: tuple, kwargs: dict, presets: Any, primary_id: Any) -> Any:
    """Upstream's loader, its streaming JSON dataset of a local ``.jsonl`` file replaced by the
    file's lines read one by one (regenerate/lines.py): a line that cannot be read is counted
    skipped by reason, the other rows run. On ``--resume`` over an output whose keys were made
    from rows read through Arrow, the conversations it holds are known by their keys as read
    now too (regenerate/resume_keys.py)."""
    config, dataset, split = wrapped(*args, **kwargs)
    name = str(bind(wrapped, args, kwargs).arguments["dataset_name"])
    path = Path(name)
    if name in presets or not is_json_lines(path):
        return config, dataset, split
    state = regen_state.current()
    if state is not None and resume_keys.hashed_keys(state.seen):
        lines = JsonLines(path, lambda reason: None)
        state.seen |= resume_keys.keys_as_read_now(state.seen, lines, dataset, primary_id)
    return config, JsonLines(path, _skip_line), split


def _skip_line(reason: str) -> None:
    counts = regen_state.tally()
    counts.conversations_in += 1
    counts.skipped[reason] += 1


def _build_detokenizer(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """Upstream loads ``--model`` as a tokenizer for the review-only text; the same tokenizer
    object (held by its decoder) renders a first prompt the server refused: one load. The
    decoder handed back writes the same text for less CPU (``review_decoder``)."""
    detokenize = wrapped(*args, **kwargs)
    state = regen_state.current()
    if state is not None:
        state.model = bind(wrapped, args, kwargs).arguments["model"]
        state.tokenizer = tokenizer_of(detokenize) or _load(state.model)
    return review_decoder(detokenize)


def review_decoder(detokenize: Any) -> Any:
    """Upstream's decoder of a row's review ``text`` (``tokenizer.decode(ids,
    skip_special_tokens=False)``), the same text for less CPU: for a list of plain ints,
    transformers' ``decode`` (5.16/5.19, tokenization_utils_base.py) checks every id in Python
    (``to_py_obj``: about 0.05 ms of a row of 700 tokens) and hands the list to the tokenizer's
    ``_decode``; here the check is one pass in C (the ids' types) and the list goes to
    ``_decode`` itself. The first row is decoded both ways: any difference (a transformers whose
    ``decode`` does more) and upstream's decoder writes every row. Anything else (another shape,
    a tokenizer class with its own ``decode``, one without ``_decode``) goes to upstream's."""
    tokenizer = tokenizer_of(detokenize)
    if tokenizer is None or not callable(getattr(tokenizer, "_decode", None)):
        return detokenize
    try:
        from transformers.tokenization_utils_base import PreTrainedTokenizerBase
    except ImportError:
        return detokenize
    if getattr(type(tokenizer), "decode", None) is not PreTrainedTokenizerBase.decode:
        return detokenize
    decode = tokenizer._decode
    trusted: list[bool] = []  # [] until the first row compared both ways

    def detokenize_ids(token_ids: Any) -> str:
        if type(token_ids) is not list or not set(map(type, token_ids)) <= _PLAIN_INT:
            return detokenize(token_ids)
        if not trusted:
            text = detokenize(token_ids)
            trusted.append(decode(token_ids=token_ids, skip_special_tokens=False) == text)
            return text
        if trusted[0]:
            return decode(token_ids=token_ids, skip_special_tokens=False)
        return detokenize(token_ids)

    return detokenize_ids


_PLAIN_INT = {int}


def tokenizer_of(detokenize: Any) -> Any:
    """The tokenizer upstream's decoder closes over (it calls its ``decode``), or None."""
    for cell in getattr(detokenize, "__closure__", None) or ():
        value = cell.cell_contents
        if hasattr(value, "apply_chat_template") and hasattr(value, "decode"):
            return value
    return None


def _load(model: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model)


def _prepare_row(row: dict[str, Any], config: Any, primary_id: Any, result_names: Any) -> Any:
    state = regen_state.current()
    tally = regen_state.tally()
    tally.conversations_in += 1
    if state is not None and state.seen and primary_id(row) in state.seen:
        tally.resumed += 1
        return None  # upstream goes to the next row (its own keys may be Arrow's: resume_keys)
    if config.filter_fn is not None and not config.filter_fn(row):
        tally.skipped[PRESET_FILTER] += 1
        return None
    normalized = {**row, **config.normalize_fn(row)} if config.normalize_fn else row
    tokenizer = getattr(state, "tokenizer", None)
    try:
        plan, tools = plan_row(normalized, config.prompt_field, tokenizer, result_names)
    except BadConversation as exc:
        tally.skipped[str(exc)] += 1
        return None
    tally.notes.update(plan.notes)
    return {**normalized, "tools": tools}, plan, []
