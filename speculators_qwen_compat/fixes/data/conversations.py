"""Fix: conversations in either format reach the template, normalised; unreadable rows are counted.

Why: upstream reads local JSON through Arrow's schema inference and only ``conversations``
(docs/upstream.md, "Conversation column and normalization"). Targets: ``load_raw_dataset`` (our
reader), ``_preprocess_batch``, ``_normalize_conversation`` and ``concatenate_datasets``.
"""

from __future__ import annotations

import json
from typing import Any

from speculators_qwen_compat.core.errors import CompatError, DataError
from speculators_qwen_compat.core.fix import Fix, Patcher
from speculators_qwen_compat.core.targets import ANY, Found, ReleaseRange, Shape, Target
from speculators_qwen_compat.core.upstream import (
    PREPROCESSING,
    batch_length,
    bind,
    call,
    is_pretokenized,
    parameters,
)
from speculators_qwen_compat.data.account import ledger
from speculators_qwen_compat.data.normalize import media_paths, processor_media
from speculators_qwen_compat.data.normalize.normalize import (
    BadConversation,
    cut_turns,
    normalize_conversation,
    normalize_row,
)
from speculators_qwen_compat.data.read import sources
from speculators_qwen_compat.data.read.columns import ColumnOptions, no_conversation_message
from speculators_qwen_compat.data.read.files import LINE_COLUMN, SOURCE_COLUMN, load_rows
from speculators_qwen_compat.data.read.speculator_rows import aligned
from speculators_qwen_compat.data.read.unreadable import (
    INVALID_UNICODE,
    MALFORMED_LINE,
    NOT_AN_OBJECT,
)
from speculators_qwen_compat.data.render import weights
from speculators_qwen_compat.data.render.render import arguments_as_mappings
from speculators_qwen_compat.fixes import route
from speculators_qwen_compat.fixes.route import ReadConversation, unread_contexts

LOADER = Target(PREPROCESSING, "load_raw_dataset", params=("train_data_path", "num_proc"))
PATH_ONLY_LOADER = Target(PREPROCESSING, "load_raw_dataset", params=("train_data_path",), arity=1)
BATCH = Target(PREPROCESSING, "_preprocess_batch", params=("examples",))
NORMALIZE = Target(PREPROCESSING, "_normalize_conversation", params=("conv",))
#: 0.8+ (a name only that era has): unknown roles become assistant turns there, dropped before.
WARNED_ROLES = Target(PREPROCESSING, "_warned_roles", kind=ANY, optional=True)
BOUNDARY_ROWS = Target(PREPROCESSING, "_render_boundary_rows", optional=True)
#: 0.8+ render through vLLM's request handling; <= 0.7 apply the template in-process.
RENDER = Target(PREPROCESSING, "render_conversation", kind=ANY, optional=True)
#: datasets' function as bound in preprocessing: joins the datasets of several ``--data``.
CONCATENATE = Target(PREPROCESSING, "concatenate_datasets", params=("dsets",), optional=True)
_SHAPE_FACTS = (WARNED_ROLES, BOUNDARY_ROWS, RENDER, CONCATENATE)
#: <= 0.5: load_raw_dataset(path, num_proc) returns the dataset; 0.6+: load_raw_dataset(path)
#: returns (dataset, normalize_fn).
RETURNS_DATASET = Shape(
    "load_raw_dataset(path, num_proc), _preprocess_batch and _normalize_conversation wrapped",
    (LOADER, BATCH, NORMALIZE, *_SHAPE_FACTS),
    when=(LOADER,),
)
RETURNS_PAIR = Shape(
    "load_raw_dataset(path), _preprocess_batch and _normalize_conversation wrapped",
    (PATH_ONLY_LOADER, BATCH, NORMALIZE, *_SHAPE_FACTS),
)


class ConversationsFix(Fix):
    name = "conversations"
    summary = "read ShareGPT and OpenAI rows (and mixes), normalise roles, parts, reasoning, tools"
    modules = (PREPROCESSING,)
    shapes = (RETURNS_DATASET, RETURNS_PAIR)
    applies_on = ReleaseRange("0.5.0", "0.9.0")

    def apply(self, found: Found, patcher: Patcher) -> None:
        render_era = found.has(WARNED_ROLES) or found.has(BOUNDARY_ROWS)
        release_roles = "assistant" if render_era else "drop"
        returns_pair = found.shape is RETURNS_PAIR

        def load_raw_dataset(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            spec = str(bind(wrapped, args, kwargs).arguments["train_data_path"])
            found = sources.resolve(spec)
            if found is None:
                result = wrapped(*args, **kwargs)
                _require_conversations(spec, result[0] if returns_pair else result)
                return result
            ledger.data_read(found.record())
            dataset = load_rows(found.sources, ColumnOptions.of_this_run().conversations_key)
            if dataset is None:  # speculator-format rows: upstream reads them itself
                result = wrapped(*args, **kwargs)
                if returns_pair:
                    return (_with_sources(result[0], spec), *result[1:])
                return _with_sources(result, spec)
            return (dataset, None) if returns_pair else dataset

        # <= 0.7 apply the template in-process (HF): tool-call arguments must be mappings there
        # (Qwen3.6 renders them with |items). 0.8+ hand messages to render_conversation, which
        # converts locally or sends vLLM the strings it accepts (render.py).
        local_template = not found.has(RENDER)

        def preprocess_batch(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            bound = bind(wrapped, args, kwargs)
            examples = bound.arguments["examples"]
            if is_pretokenized(examples):
                return wrapped(*args, **kwargs)
            with ledger.batch(batch_length(examples)):
                processor = bound.arguments.get("processor") or bound.arguments.get("tokenizer")
                multimodal = processor_media.is_multimodal(processor) if local_template else None
                read = read_batch(examples, local_template, release_roles, multimodal)
                bound.arguments["examples"] = read
                out = call(wrapped, bound)
                unread = unread_contexts(read["conversations"])
                if unread:
                    raise CompatError(
                        f"{unread} conversation(s) have assistant turns marked weight 0 (or "
                        "train: false) that the row guard never received, so they would be "
                        "trained on: the row_guard fix is off or did not apply (run "
                        "`python -m speculators_qwen_compat status`); switch it on, or drop "
                        "the weights from the data if those turns should be trained"
                    )
                return out

        # Called once per row: its two arguments are read at their place in upstream's own
        # signature (NORMALIZE requires ``conv`` by name), not through a full bind.
        names = parameters(getattr(*found.owner_and_name(NORMALIZE)))
        conv_at = names.index("conv")
        dropout_at = names.index("turn_dropout") if "turn_dropout" in names else None

        def normalize_turns(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            conv = args[conv_at] if len(args) > conv_at else kwargs["conv"]
            dropout = False
            if dropout_at is not None:
                dropout = args[dropout_at] if len(args) > dropout_at else kwargs.get("turn_dropout")
            try:
                # read_batch's conversations come back here normalised (route.py
                # ReadConversation); normalising is idempotent: only <= 0.6's dropout is left.
                if isinstance(conv, ReadConversation):
                    turns = cut_turns(conv, bool(dropout))
                else:
                    turns = normalize_conversation(conv, bool(dropout), release_roles)
            except BadConversation:
                return []  # read_batch already counted it; upstream skips an empty result
            weights.record_rendered(turns)
            return turns

        patcher.wrap(*found.owner_and_name(found.shape.targets[0]), load_raw_dataset)
        if found.has(CONCATENATE):
            patcher.wrap(*found.owner_and_name(CONCATENATE), _concatenate_aligned)
        route.wrap(found, patcher, BATCH, self.name, preprocess_batch)
        patcher.wrap(*found.owner_and_name(NORMALIZE), normalize_turns)


def read_batch(
    examples: dict[str, list[Any]],
    local_template: bool = False,
    release_roles: str | None = None,
    multimodal: bool | None = None,
) -> dict[str, list[Any]]:
    """Parse and normalise every row of a batch; unreadable rows are counted and left out.

    ``local_template``: the release applies the template itself (<= 0.7), so tool-call arguments
    are handed to it as mappings (render.py ``arguments_as_mappings``). ``release_roles``: what
    the installed release does with an unknown role (normalize.py ``unknown_role_policy``).
    ``multimodal``: with ``local_template``, whether the release loaded the target's processor
    (True) or a tokenizer (False): image/video parts are prepared for it or the row is skipped
    (data/normalize/processor_media.py); None leaves them to the release (0.8+ render them).
    Media in every form (parts, image columns) reach every release in the form upstream's
    adapter takes (data/normalize/media_forms.py, through the normaliser).

    Returns the columns upstream reads: ``conversations`` (each a route.py
    ``ReadConversation``, carrying the indices of its weight-0 assistant turns for the row
    guard), ``tools`` when any row has tools, and the ``file:line`` source of each row kept.
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
            with media_paths.row_source(sources[i] if sources else None):
                normalized = normalize_row(row, options, release_roles)
            conversation = normalized.conversation  # media parts in upstream's form already
            if lines is not None and "\\ud" in lines[i].lower():
                _refuse_lone_surrogates(conversation, normalized.tools)
            if multimodal is not None:
                conversation = processor_media.for_local_template(conversation, multimodal)
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
            normalized.context,
            lines[i] if lines is not None else None,
        )
        if local_template:
            conversation = arguments_as_mappings(conversation)
        out["conversations"].append(ReadConversation(conversation, normalized.context))
        out["tools"].append(normalized.tools)
        out[SOURCE_COLUMN].append(where)
    if not any(out["tools"]):
        del out["tools"]
    return out


def _with_sources(dataset: Any, spec: str) -> Any:
    """Speculator-format rows as upstream read them, each with its source ``SPEC[i]`` (its
    index in the file or folder), for the counts' examples and the duplicate check."""
    if SOURCE_COLUMN in dataset.column_names:
        return dataset
    return dataset.add_column(SOURCE_COLUMN, [f"{spec}[{i}]" for i in range(len(dataset))])


def _concatenate_aligned(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """Several ``--data`` mixing speculator-format rows with conversations: every part cast
    to the same integer widths first (data/read/speculator_rows.py ``aligned``); upstream's
    concatenation refuses the mix otherwise, in every release with a pass-through."""
    bound = bind(wrapped, args, kwargs)
    parts = list(bound.arguments["dsets"])
    features = aligned([part.features for part in parts]) if len(parts) > 1 else None
    if features is not None:
        bound.arguments["dsets"] = [
            part if part.features == features else part.cast(features) for part in parts
        ]
    return call(wrapped, bound)


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


def _require_conversations(spec: str, dataset: Any) -> None:
    columns = list(getattr(dataset, "column_names", None) or [])
    options = ColumnOptions.of_this_run()
    if not columns or is_pretokenized(dict.fromkeys(columns)):
        return
    try:
        first = dataset[0] if len(dataset) else {}
    except Exception:  # a streaming or odd data set: let the rows decide
        return
    from speculators_qwen_compat.data.read.columns import NoConversation, find_conversation

    try:
        find_conversation(first, options)
    except NoConversation:
        raise DataError(
            no_conversation_message(f"--data {spec}", columns, options.conversations_key)
        ) from None
