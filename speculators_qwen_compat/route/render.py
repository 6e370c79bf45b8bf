"""The route of a prepare_data row through speculators 0.8+ (the render generation), top to bottom:
each wrapper stands where upstream calls its function, callers before callees, and hands the row
to data/. ``ROUTE`` at the end declares that order and nesting: the fixes install their stages
from it, ``status --route`` prints it (declaration.py), tests/test_route_trace.py traces a run."""

from __future__ import annotations

from typing import Any

from speculators_qwen_compat.core.upstream import (
    CLI_PREPARE_DATA,
    PREPROCESSING,
    RENDER_CLIENT,
    arguments,
    batch_length,
    bind,
    call,
)
from speculators_qwen_compat.data.account import ledger, rows
from speculators_qwen_compat.data.normalize import batch as reading
from speculators_qwen_compat.data.normalize.normalize import (
    BadConversation,
    cut_turns,
    normalize_conversation,
)
from speculators_qwen_compat.data.read.files import SOURCE_COLUMN
from speculators_qwen_compat.data.render import endpoint, row_tensors
from speculators_qwen_compat.route import shared
from speculators_qwen_compat.route.declaration import ENTRY_POINT, Stage, at, nest

GENERATION = reading.RENDER
RELEASES = "0.8+"
#: What makes a release this generation: conversations rendered through vLLM's request handling.
MARK = "render_conversation"
#: Unknown roles become assistant turns in this generation (normalize.py unknown_role_policy).
RELEASE_ROLES = "assistant"


# prepare_data (upstream's typer command): our entry point has fixed the run's options, added
# --render-endpoint local when none is given and moved --output into a staging folder
# (cli/prepare_data.py); overwrite_guard let its --overwrite guard accept compat_report.json.


def build_local(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """build_speculator_training_dataset, local_render: the map workers get ``local:<path>``."""
    bound = bind(wrapped, args, kwargs)
    given, processor = bound.arguments["render_endpoint"], bound.arguments["processor"]
    bound.arguments["render_endpoint"] = endpoint.for_workers(given, processor)
    return call(wrapped, bound)


def batch_read(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """_preprocess_batch, conversations: each row read, normalised, counted; handed on as a
    ReadConversation (this generation takes tool-call arguments as written)."""
    return shared.read_batch(wrapped, args, kwargs, GENERATION, RELEASE_ROLES, None)


def batch_guard(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """_preprocess_batch, row_guard: what the batch's rows are counted with."""
    arguments = bind(wrapped, args, kwargs).arguments
    examples = arguments["examples"]
    with ledger.batch(batch_length(examples)) as opened:
        opened.minimum = arguments.get("minimum_valid_tokens")
        opened.sources = examples.get(SOURCE_COLUMN)
        try:
            return wrapped(*args, **kwargs)
        finally:
            opened.sources = None


def append_row(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """_append_row, row_tensors."""
    answer = row_tensors.append_through_numpy(**bind(wrapped, args, kwargs).arguments)
    return wrapped(*args, **kwargs) if answer is None else answer


def conversation_rows(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """_render_conversation_rows, row_guard: one conversation counted (a rejection included)."""
    arguments = bind(wrapped, args, kwargs).arguments
    idx = arguments["idx"]
    with ledger.batch(0) as opened:
        sources = opened.sources
        where = sources[idx] if sources and isinstance(idx, int) else f"row {idx} of its batch"
        opened.render_error = None
        zero_weight = reading.zero_weight_turns_of(arguments["conv"])  # a rejected row's too
        try:
            found = wrapped(*args, **kwargs)
        except Exception as exc:
            ledger.reject(exc, where)
            return None  # upstream's "unusable conversation"
        return rows.rendered(found, where, zero_weight, arguments["max_length"])


def normalize(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """_normalize_conversation, conversations: a ReadConversation is normalised already."""
    conv = arguments(wrapped, args, kwargs)["conv"]
    try:
        if isinstance(conv, reading.ReadConversation):
            return cut_turns(conv)
        return normalize_conversation(conv, False, RELEASE_ROLES)
    except BadConversation:
        return []  # read_batch already counted it; upstream skips an empty result


def boundary_rows(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """_render_boundary_rows, row_guard: why a render failed, kept for the count."""
    try:
        return wrapped(*args, **kwargs)
    except Exception as exc:
        opened = ledger.open_batch()
        if opened is not None:
            opened.render_error = exc
        raise


def render_conversation(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """render_conversation as preprocessing binds it, local_render."""
    bound = bind(wrapped, args, kwargs)
    arguments = bound.arguments
    if endpoint.is_local(arguments["endpoint"]):
        return endpoint.render(arguments)
    if not isinstance(arguments["messages"], list):
        return wrapped(*args, **kwargs)
    raw = getattr(wrapped, "__wrapped__", wrapped)  # without upstream's with_retries
    return endpoint.from_server(lambda: call(raw, bound), arguments)


def post(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """render_client._post, local_render: --mm-processor-kwargs join every request's body."""
    bound = bind(wrapped, args, kwargs)
    bound.arguments["json"] = endpoint.with_processor_kwargs(bound.arguments["json"])
    return call(wrapped, bound)


P = PREPROCESSING
#: datasets' map: the builder's, and the cast of several --data to one set of types.
MAP = Stage("bounded_output", "keep_in_memory off for the builder's map", shared.dataset_map)
#: The route: in the order a row meets them, each call one level under its caller.
ROUTE = nest(
    at(0, CLI_PREPARE_DATA, "prepare_data",
       Stage(ENTRY_POINT, "options fixed; --render-endpoint local added; --output staged"),
       Stage("overwrite_guard", "its --overwrite guard accepts compat_report.json")),
    at(1, P, "load_and_preprocess_dataset",
       Stage("run_report", "counted across map workers; no row left is an error", shared.run),
       bound_in=(CLI_PREPARE_DATA,)),
    at(2, P, "load_raw_dataset",
       Stage("conversations", "local files and tables read as rows", shared.load_raw_dataset)),
    at(2, P, "build_speculator_training_dataset",
       Stage("bounded_output", "its map over our rows writes to disk", shared.build_to_disk),
       Stage("local_render", "'local' becomes local:<model path>", build_local)),
    at(3, "datasets", "Dataset.map", MAP),
    at(4, P, "_preprocess_batch",
       Stage("messages_json", "the batch handed on with messages typed", shared.batch_messages),
       Stage("conversations", "rows read, normalised, counted: ReadConversation", batch_read),
       Stage("row_guard", "the batch's sources and --minimum-valid-tokens kept", batch_guard)),
    at(5, P, "_passthrough_pretokenized",
       Stage("row_guard", "each speculator-format row counted", shared.passthrough),
       when="speculator-format rows"),
    at(6, P, "_append_row", Stage("row_tensors", "the row's tensors through numpy", append_row)),
    at(5, P, "_render_conversation_rows",
       Stage("row_guard", "the conversation counted; a rejection skipped", conversation_rows)),
    at(6, P, "_normalize_conversation",
       Stage("conversations", "a ReadConversation is only cut", normalize)),
    at(6, P, "_render_boundary_rows",
       Stage("row_guard", "why a render failed, kept for the count", boundary_rows)),
    at(7, P, "render_conversation",
       Stage("local_render", "local: rendered here; a URL: retried", render_conversation)),
    at(8, RENDER_CLIENT, "_post",
       Stage("local_render", "--mm-processor-kwargs join the body", post),
       when="--render-endpoint URL"),
    at(5, P, "_append_row", Stage("row_tensors", "the row's tensors through numpy", append_row)),
    at(2, P, "concatenate_datasets",
       Stage("conversations", "several --data cast to one set of types", shared.concatenate)),
    at(3, "datasets", "Dataset.map", MAP, when="--data of other column types"),
    at(2, P, "save_token_frequency_distribution",
       Stage("run_report", "a refused run writes none", shared.token_frequencies_refused),
       Stage("token_frequency", "counted over Arrow batches", shared.token_frequencies),
       when="0.9: --no-skip-token-freq"),
    at(2, P, "_visualize_sample",
       Stage("run_report", "no row left is an error", shared.visualize_sample)),
)  # fmt: skip
