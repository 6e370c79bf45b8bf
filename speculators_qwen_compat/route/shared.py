"""The wrappers both generations put at the same upstream functions, in the order a row meets them
(render.py and script.py place them in their routes): the run, the raw data, the map to disk, the
typed batch, speculator-format rows, the join of several ``--data``, the counts, the sample."""

from __future__ import annotations

from typing import Any

from speculators_qwen_compat.core.upstream import (
    batch_length,
    bind,
    call,
    is_pretokenized,
    parameters,
)
from speculators_qwen_compat.data.account import ledger, rows, token_frequency
from speculators_qwen_compat.data.account import run as runs
from speculators_qwen_compat.data.normalize import batch as reading
from speculators_qwen_compat.data.read import files, raw_dataset
from speculators_qwen_compat.data.render.arrow_batch import with_json_messages


def run(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """load_and_preprocess_dataset, run_report."""
    return runs.counted(wrapped, args, kwargs)


def load_raw_dataset(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """load_raw_dataset, conversations: <= 0.5 take (path, num_proc) and return the dataset,
    0.6+ take the path and return (dataset, normalize function)."""
    spec = str(bind(wrapped, args, kwargs).arguments["train_data_path"])
    pair = "num_proc" not in parameters(wrapped)
    return raw_dataset.load(lambda: wrapped(*args, **kwargs), spec, returns_pair=pair)


def build_to_disk(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """The dataset builder, bounded_output."""
    with files.maps_to_disk(bind(wrapped, args, kwargs).arguments["dataset"]):
        return wrapped(*args, **kwargs)


def dataset_map(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """Dataset.map, bounded_output."""
    return wrapped(*args, **files.map_kwargs(instance, kwargs))


def read_batch(
    wrapped: Any, args: tuple, kwargs: dict, generation: str, roles: str, multimodal: bool | None
) -> Any:
    """_preprocess_batch, conversations, as each generation's ``batch_read`` calls it: each row
    read, normalised and counted in one batch, handed on as a ReadConversation; a weight left
    unread by upstream is refused after its call. Pretokenized batches pass untouched."""
    bound = bind(wrapped, args, kwargs)
    examples = bound.arguments["examples"]
    if is_pretokenized(examples):
        return wrapped(*args, **kwargs)
    with ledger.batch(batch_length(examples)):
        read = reading.read_batch(examples, generation, roles, multimodal)
        bound.arguments["examples"] = read
        out = call(wrapped, bound)
        reading.refuse_unread_weights(read["conversations"])
        return out


def batch_messages(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """_preprocess_batch, messages_json."""
    return with_json_messages(wrapped(*args, **kwargs))


def passthrough(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """_passthrough_pretokenized, row_guard."""
    return rows.passthrough(wrapped, args, kwargs)


def concatenate(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """concatenate_datasets as preprocessing binds it, conversations."""
    bound = bind(wrapped, args, kwargs)
    bound.arguments["dsets"] = raw_dataset.aligned_parts(list(bound.arguments["dsets"]))
    return call(wrapped, bound)


def token_frequencies_refused(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """save_token_frequency_distribution, run_report."""
    runs.refuse_before_writing()
    return wrapped(*args, **kwargs)


def token_frequencies(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """save_token_frequency_distribution, token_frequency."""
    arguments = bind(wrapped, args, kwargs).arguments
    if token_frequency.save(arguments["dataset"], arguments["output_path"]):
        return None
    return wrapped(*args, **kwargs)


def visualize_sample(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """_visualize_sample, run_report."""
    runs.refuse_empty(bind(wrapped, args, kwargs).arguments["preprocessed"])
    return wrapped(*args, **kwargs)
