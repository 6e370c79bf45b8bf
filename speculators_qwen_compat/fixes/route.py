"""The route of a row through upstream, declared once: for each upstream function our fixes wrap
from the data file to the written row (and to a trained, served drafter), the fixes that wrap it,
outer to inner, and what each does there. Read this before any fix. A function several fixes wrap
is wrapped once (core/fix.py ``Route``), its stages in this order (tests/test_route.py checks it);
what a stage hands those inside it travels in upstream's own arguments (``ReadConversation``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from speculators_qwen_compat.core.fix import Patcher
from speculators_qwen_compat.core.targets import Found, Target


@dataclass(frozen=True)
class Stop:
    """One fix's stage at one upstream function."""

    fix: str
    does: str


#: upstream function (its path in its module) -> stops, outer to inner, in the order a row meets
#: them. <= 0.7 build rows in ``build_eagle3_dataset``, 0.8+ in
#: ``build_speculator_training_dataset``; each release has the functions its shape names.
ROUTE: dict[str, tuple[Stop, ...]] = {
    "load_and_preprocess_dataset": (
        Stop(
            "run_report",
            "counts the run across map workers (data/account/ledger.py), writes the report",
        ),
    ),
    "load_raw_dataset": (
        Stop(
            "conversations", "reads local files and Hub tables (data/read/files.py, table_rows.py)"
        ),
    ),
    "concatenate_datasets": (
        Stop("conversations", "several --data cast to one set of types (speculator_rows.py)"),
    ),
    "build_eagle3_dataset": (
        Stop("bounded_output", "rows written to Arrow files, not held in memory"),
        Stop("forked_tokenizer", "the tokenizer crosses to forked map workers by reference"),
    ),
    "build_speculator_training_dataset": (
        Stop("bounded_output", "rows written to Arrow files, not held in memory"),
        Stop("local_render", "--render-endpoint local: no vLLM server needed"),
    ),
    "Dataset.map": (Stop("bounded_output", "the map writes to the run's own cache folder"),),
    "_preprocess_batch": (
        Stop("messages_json", "the batch handed to datasets, messages typed (arrow_batch.py)"),
        Stop(
            "conversations",
            "each row read, normalised, media resolved (normalize.py), counted; handed on as a "
            "ReadConversation",
        ),
        Stop("row_guard", "a batch that fails is split; each row the template rejects counted"),
    ),
    "_normalize_conversation": (
        Stop(
            "conversations",
            "upstream's per-row normaliser replaced by ours; a ReadConversation only cut",
        ),
    ),
    "_supports_assistant_mask": (Stop("mask_probe", "probes the template without crashing"),),
    "_get_input_ids_loss_mask": (Stop("mask_probe", "a processor's batched mask unbatched"),),
    "_create_loss_mask_from_offsets": (
        Stop("row_guard", "weight-0 assistant turns unset in the mask (data/render/weights.py)"),
        Stop("offsets_loss_mask", "the pattern mask built with numpy"),
    ),
    "render_conversation": (Stop("local_render", "the template rendered in-process (render.py)"),),
    "_post": (Stop("local_render", "a render server's faults retried (render_faults.py)"),),
    "_render_conversation_rows": (Stop("row_guard", "a rejected conversation counted"),),
    "_render_boundary_rows": (Stop("row_guard", "the rejection's reason kept for the count"),),
    "_passthrough_pretokenized": (Stop("row_guard", "speculator-format rows counted"),),
    "_append_row": (Stop("row_tensors", "the row's tensors built through numpy"),),
    "_visualize_sample": (Stop("run_report", "no row left is one clear error"),),
    "save_token_frequency_distribution": (
        Stop("run_report", "a refused run writes no count"),
        Stop("token_frequency", "token counts over Arrow batches with numpy"),
    ),
    "Trainer.run_training": (
        Stop("trained_record", "the drafter marked as trained in this process"),
        Stop("served_attention", "a drafter vLLM would serve differently refused at start"),
        Stop("sample_drops", "dropped samples counted"),
    ),
    "SpeculatorModel.save_pretrained": (
        Stop("trained_record", "a record of what the weights trained with, beside config.json"),
        Stop("served_attention", "attention types saved as vLLM serves them"),
        Stop("served_rope", "the rope config saved so vLLM loads the drafter"),
    ),
}


class ReadConversation(list[dict[str, Any]]):
    """One conversation as the conversations stage at ``_preprocess_batch`` hands it on, in
    place of the row upstream read: its turns normalised (data/normalize/normalize.py), with
    ``context``, the indices of its weight-0 assistant turns.

    Why a type and not a column or a table: upstream's ``_preprocess_batch`` passes each
    conversation object unchanged to the calls our inner stages wrap (``_normalize_conversation``
    on every release, ``_render_conversation_rows`` on 0.8+) and the row guard splits batches
    by slicing their lists, so what the conversation carries reaches every stop of its row, in
    any map worker, whatever batch it ends up in. Upstream's per-row ``_normalize_conversation``
    sees by this type that the turns are normalised already (only <= 0.6's dropout is left,
    normalize.py ``cut_turns``: a plain list goes on); the row guard reads ``context`` to keep
    those turns out of the loss mask (data/render/weights.py)."""

    __slots__ = ("context", "context_read")

    def __init__(self, turns: list[dict[str, Any]], context: list[int]) -> None:
        super().__init__(turns)
        self.context: tuple[int, ...] = tuple(context)
        #: set when the row guard reads ``context`` (``context_of``): the conversations stage
        #: checks it after upstream's batch, so a hand-over that did not arrive is loud
        self.context_read = False


def context_of(conversation: Any) -> tuple[int, ...]:
    """The weight-0 assistant turns ``conversation`` carries (``ReadConversation``); none for
    any other (a conversation our reader did not read)."""
    if not isinstance(conversation, ReadConversation):
        return ()
    conversation.context_read = True
    return conversation.context


def unread_contexts(conversations: list[Any]) -> int:
    """How many of ``conversations`` carry weight-0 turns the row guard never read (it is off,
    failed, or a release copied the conversation on the way): they would be trained on."""
    return sum(
        isinstance(c, ReadConversation) and bool(c.context) and not c.context_read
        for c in conversations
    )


def stage_order(path: str) -> tuple[str, ...]:
    """The fixes wrapping upstream's ``path``, outer to inner."""
    return tuple(stop.fix for stop in ROUTE[path])


def wrap(found: Found, patcher: Patcher, target: Target, fix: str, wrapper: Any) -> None:
    """Wrap ``target`` as ``fix``'s stage of its route (``ROUTE``): one wrapper per function,
    however many fixes wrap it."""
    order = stage_order(target.path)
    if fix not in order:
        raise KeyError(f"fixes/route.py: no stop of {fix} at {target.path}")
    patcher.wrap_stage(*found.owner_and_name(target), order, fix, wrapper)
