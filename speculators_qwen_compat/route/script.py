"""The route of a prepare_data row through speculators <= 0.7 (the script generation), top to
bottom: each wrapper stands where upstream calls its function, callers before callees, and hands
the row to data/. ``ROUTE`` at the end declares that order and nesting: the fixes install their
stages from it, ``status --route`` prints it, tests/test_route_trace.py traces a run."""

from __future__ import annotations

import sys
from typing import Any

from speculators_qwen_compat.core.upstream import (
    PREPROCESSING,
    arguments,
    bind,
    is_pretokenized,
)
from speculators_qwen_compat.data.account import ledger, rows
from speculators_qwen_compat.data.account.batch_guard import BatchGuard
from speculators_qwen_compat.data.normalize import batch as reading
from speculators_qwen_compat.data.normalize import processor_media
from speculators_qwen_compat.data.normalize.normalize import (
    BadConversation,
    cut_turns,
    normalize_conversation,
)
from speculators_qwen_compat.data.render import mask_probe, offsets_mask, weights
from speculators_qwen_compat.data.render.forked_tokenizer import inherited_by_forked_workers
from speculators_qwen_compat.route import shared
from speculators_qwen_compat.route.declaration import ENTRY_POINT, Stage, at, nest

GENERATION = reading.SCRIPT
RELEASES = "<= 0.7"
#: The command these releases ship only in git: our stand-in (cli/release_script.py) runs it.
STAND_IN = "speculators_qwen_compat.cli.release_script"
#: Unknown roles are dropped in this generation (normalize.py unknown_role_policy).
RELEASE_ROLES = "drop"


# the git-only scripts/prepare_data.py: our stand-in takes the release's flags, fixes the run's
# options and moves --output into a staging folder (cli/prepare_data.py, cli/release_script.py).


def build_forked(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """build_eagle3_dataset, forked_tokenizer."""
    found = bind(wrapped, args, kwargs).arguments
    tokenizer = found.get("tokenizer", found.get("processor"))
    if (found["num_proc"] or 1) <= 1 or tokenizer is None:
        return wrapped(*args, **kwargs)
    with inherited_by_forked_workers(tokenizer):
        return wrapped(*args, **kwargs)


def probe(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> bool:
    """_supports_assistant_mask, mask_probe: any template error means no HF assistant mask."""
    (processor,) = bind(wrapped, args, kwargs).arguments.values()
    adapt = getattr(sys.modules[wrapped.__module__], "_adapt_conv_for_hf", None)  # 0.6/0.7
    return mask_probe.supports_assistant_mask(adapt, processor)


def batch_read(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """_preprocess_batch, conversations: each row read, normalised, counted; handed on as a
    ReadConversation (tool-call arguments as mappings: the template is applied here)."""
    given = arguments(wrapped, args, kwargs)  # the light binding: shared.read_batch binds again
    processor = given.get("processor") or given.get("tokenizer")
    multimodal = processor_media.is_multimodal(processor)
    return shared.read_batch(wrapped, args, kwargs, GENERATION, RELEASE_ROLES, multimodal)


def batch_guard(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """_preprocess_batch, row_guard: a failing batch split, each row counted."""
    bound = bind(wrapped, args, kwargs)
    examples = bound.arguments["examples"]
    module = sys.modules[wrapped.__module__]
    if is_pretokenized(examples) and not hasattr(module, "_passthrough_pretokenized"):
        rows.unsupported(examples)  # <= 0.6 cannot read them
        return wrapped(*args, **kwargs)
    if is_pretokenized(examples) or not examples.get("conversations"):
        return wrapped(*args, **kwargs)
    return BatchGuard(module, wrapped, bound).run()


def normalize(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """_normalize_conversation, conversations: a ReadConversation is only cut (<= 0.6's
    --turn-dropout); the turns it leaves are what the row rendered alone is masked against."""
    found = arguments(wrapped, args, kwargs)
    conv, dropout = found["conv"], bool(found.get("turn_dropout"))
    try:
        if isinstance(conv, reading.ReadConversation):
            turns = cut_turns(conv, dropout)
        else:
            turns = normalize_conversation(conv, dropout, RELEASE_ROLES)
    except BadConversation:
        return []  # read_batch already counted it; upstream skips an empty result
    opened = ledger.open_batch()
    if opened is not None and opened.row is not None:
        opened.row.rendered_turns = weights.assistant_turns(turns)
    return turns


def unbatched(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """_get_input_ids_loss_mask, mask_probe: a processor's one-entry batch unpacked."""
    result = wrapped(*args, **kwargs)
    if isinstance(result, tuple) and len(result) == 2:
        return mask_probe.unbatch(result[0]), mask_probe.unbatch(result[1])
    return result


def mask_weights(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """_create_loss_mask_from_offsets, row_guard: the weight-0 turns of the row rendered alone
    unset in its pattern mask."""
    mask = wrapped(*args, **kwargs)
    opened = ledger.open_batch()
    row = opened.row if opened is not None else None
    if row is not None and row.ordinals:
        found = bind(wrapped, args, kwargs).arguments
        text, offsets, pattern = found["text"], found["offsets"], found["assistant_pattern"]
        weights.unset_in_pattern_mask(row, mask, text, offsets, pattern)
    return mask


def mask_spans(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """_create_loss_mask_from_offsets, offsets_loss_mask."""
    found = bind(wrapped, args, kwargs).arguments
    try:
        mask = offsets_mask.loss_mask(found["text"], found["offsets"], found["assistant_pattern"])
    except Exception:  # upstream's own function then raises (or answers) as it does
        mask = None
    return wrapped(*args, **kwargs) if mask is None else mask


P = PREPROCESSING
#: datasets' map: the builder's, and the cast of several --data to one set of types.
MAP = Stage("bounded_output", "keep_in_memory off for the builder's map", shared.dataset_map)
#: The route: in the order a row meets them, each call one level under its caller.
ROUTE = nest(
    at(0, STAND_IN, "run",
       Stage(ENTRY_POINT, "the git-only script's flags; options fixed; --output staged")),
    at(1, P, "load_and_preprocess_dataset",
       Stage("run_report", "counted across map workers; no row left is an error", shared.run)),
    at(2, P, "load_raw_dataset",
       Stage("conversations", "local files and tables read as rows", shared.load_raw_dataset)),
    at(2, P, "build_eagle3_dataset",
       Stage("bounded_output", "its map over our rows writes to disk", shared.build_to_disk),
       Stage("forked_tokenizer", "the tokenizer crosses to forked workers", build_forked)),
    at(3, P, "_supports_assistant_mask",
       Stage("mask_probe", "probes the template without crashing", probe)),
    at(3, "datasets", "Dataset.map", MAP),
    at(4, P, "_preprocess_batch",
       Stage("messages_json", "the batch handed on with messages typed", shared.batch_messages),
       Stage("conversations", "rows read, normalised, counted: ReadConversation", batch_read),
       Stage("row_guard", "a failing batch split; each row counted", batch_guard)),
    at(5, P, "_passthrough_pretokenized",
       Stage("row_guard", "each speculator-format row counted", shared.passthrough),
       when="0.7: speculator-format rows"),
    at(5, P, "_normalize_conversation",
       Stage("conversations", "a ReadConversation is only cut", normalize)),
    at(5, P, "_get_input_ids_loss_mask",
       Stage("mask_probe", "a processor's batched mask unbatched", unbatched)),
    at(6, P, "_create_loss_mask_from_offsets",
       Stage("row_guard", "weight-0 turns unset in the mask", mask_weights),
       Stage("offsets_loss_mask", "the pattern mask marked with numpy", mask_spans),
       when="no HF assistant mask"),
    at(2, P, "concatenate_datasets",
       Stage("conversations", "several --data cast to one set of types", shared.concatenate)),
    at(3, "datasets", "Dataset.map", MAP, when="--data of other column types"),
    at(2, P, "save_token_frequency_distribution",
       Stage("run_report", "a refused run writes none", shared.token_frequencies_refused),
       Stage("token_frequency", "counted over Arrow batches", shared.token_frequencies)),
    at(2, P, "_visualize_sample",
       Stage("run_report", "no row left is an error", shared.visualize_sample)),
)  # fmt: skip
