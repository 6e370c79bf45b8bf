"""Call every upstream function a fix wraps, on inputs upstream accepts, and record the outcome.

Run as a script by contracts/test_contracts.py, twice per release: with the fixes off
(``SPECULATORS_QWEN_COMPAT=0``, upstream as installed) and on. Usage: ``python
contract_probe.py WORKDIR OUT.json``. For each case it writes what came back (``shape``: types,
lengths, keys; ``value``: the JSON form where the value is small), what was raised (the
exception's class names, most derived first, and its message) and whether the arguments were
left unchanged. The test compares the two runs: upstream's own outcome is the oracle.

Functions (speculators.data_generation.preprocessing unless named): ``_normalize_conversation``,
``load_raw_dataset``, ``_supports_assistant_mask`` (<= 0.7), ``_preprocess_batch`` (<= 0.7),
``_visualize_sample``, ``render_conversation`` and ``_render_conversation_rows`` (0.8+, with an
endpoint nothing answers: the path a URL takes stays upstream's; rows rendered by a real vLLM are
test_render_endpoint.py's), ``load_and_preprocess_dataset`` (0.8+: that endpoint),
``_passthrough_pretokenized`` (0.7+), ``concatenate_datasets`` as preprocessing binds it, and
``speculators.cli.prepare_data.PREPARE_DATA_OVERWRITE_ALLOWED_FILES`` (0.8+).
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}
#: A chat template every release accepts (no strictness, no generation tags).
LENIENT_TEMPLATE = (
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)
UNREACHABLE = "http://127.0.0.1:9"  # nothing listens on the discard port: connection refused
NO_ARGUMENTS = {"id": "call_2", "type": "function", "function": {"name": "now"}}
CONVERSATIONS: dict[str, list[dict[str, Any]]] = {
    "sharegpt": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}],
    "openai": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ],
    "tool_calls": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
        {"role": "tool", "content": "sunny", "tool_call_id": "call_1"},
        {"role": "assistant", "content": "sunny"},
    ],
    "tool_call_without_arguments": [
        {"role": "user", "content": "time?"},
        {"role": "assistant", "content": "", "tool_calls": [NO_ARGUMENTS]},
        {"role": "tool", "content": "noon", "tool_call_id": "call_2"},
        {"role": "assistant", "content": "noon"},
    ],
    "unknown_role": [
        {"role": "user", "content": "hi"},
        {"role": "Qwen3.6-27B", "content": "hello"},
    ],
    "thinking": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", "thinking": "greet back"},
    ],
    "reasoning_content": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", "reasoning_content": "greet back"},
    ],
}


def shape(value: Any, depth: int = 0) -> Any:
    """Types, lengths and keys of a value (a dataset is its type, rows and columns)."""
    name = type(value).__name__
    if hasattr(value, "column_names") and hasattr(value, "num_rows"):
        return {"type": name, "rows": value.num_rows}
    if depth > 3:
        return name
    if isinstance(value, dict):
        return {"type": name, "items": {str(k): shape(v, depth + 1) for k, v in value.items()}}
    if isinstance(value, (list, tuple)):
        return {"type": name, "items": [shape(v, depth + 1) for v in value[:8]], "len": len(value)}
    if hasattr(value, "shape") and hasattr(value, "dtype"):  # a tensor or an array
        return {"type": name, "shape": list(value.shape)}
    return name


def jsonable(value: Any) -> Any:
    """The value as plain JSON data (tensors as lists), or None when it holds anything else."""

    def plain(v: Any) -> Any:
        if hasattr(v, "tolist"):
            return v.tolist()
        raise TypeError(type(v).__name__)

    try:
        text = json.dumps(value, default=plain)
    except (TypeError, ValueError):
        return None
    return json.loads(text) if len(text) < 20_000 else None


def call(func: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    before = copy.deepcopy((args, kwargs))
    try:
        result = func(*args, **kwargs)
    except BaseException as exc:  # what upstream raises is part of its contract
        names = [c.__module__ + "." + c.__qualname__ for c in type(exc).__mro__]
        return {
            "raised": names,
            "message": str(exc)[:300],
            "unchanged": _same(before, args, kwargs),
        }
    return {
        "raised": None,
        "shape": shape(result),
        "value": jsonable(result),
        "unchanged": _same(before, args, kwargs),
    }


def _same(before: Any, args: tuple, kwargs: dict) -> bool:
    try:
        return bool(before == (args, kwargs))
    except Exception:  # a value without a plain == (a tokenizer): not compared
        return True


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def probe(work: Path) -> dict[str, Any]:
    from speculators.data_generation import preprocessing as pre

    from speculators_qwen_compat import demo

    out: dict[str, Any] = {}
    params = {name: list(inspect.signature(getattr(pre, name)).parameters) for name in dir(pre)
              if inspect.isfunction(getattr(pre, name))}  # fmt: skip

    for name, conv in CONVERSATIONS.items():
        out[f"_normalize_conversation/{name}"] = call(pre._normalize_conversation, conv)

    sharegpt = [{"conversations": CONVERSATIONS["sharegpt"]}] * 3
    data = work / "data"
    out["load_raw_dataset/jsonl_file"] = call(
        pre.load_raw_dataset, str(write_jsonl(data / "one.jsonl", sharegpt))
    )
    json_file = data / "array.json"
    json_file.write_text(json.dumps(sharegpt[:2]), encoding="utf-8")
    out["load_raw_dataset/json_array_file"] = call(pre.load_raw_dataset, str(json_file))
    out["load_raw_dataset/missing_file"] = call(pre.load_raw_dataset, str(work / "nope.jsonl"))
    out["load_raw_dataset/unsupported_spec"] = call(pre.load_raw_dataset, "not_a_real_preset")
    if "Local directory" in (pre.load_raw_dataset.__doc__ or "") or _reads_folders(pre):
        folder = work / "shards"
        write_jsonl(folder / "a.jsonl", sharegpt[:2])
        write_jsonl(folder / "nested" / "b.json", sharegpt[:1])  # JSON lines in a .json file
        out["load_raw_dataset/folder"] = call(pre.load_raw_dataset, str(folder))
        (work / "empty").mkdir()
        out["load_raw_dataset/empty_folder"] = call(pre.load_raw_dataset, str(work / "empty"))

    from transformers import AutoTokenizer

    qwen36 = AutoTokenizer.from_pretrained(str(demo.write_model(work / "qwen36", "qwen36")))
    model = demo.write_model(work / "model", "qwen36", template=LENIENT_TEMPLATE)
    tokenizer = AutoTokenizer.from_pretrained(str(model))
    if hasattr(pre, "_supports_assistant_mask"):
        out["_supports_assistant_mask/qwen36"] = call(pre._supports_assistant_mask, qwen36)
        out["_supports_assistant_mask/lenient"] = call(pre._supports_assistant_mask, tokenizer)

    if "tokenizer" in params["_preprocess_batch"] or "processor" in params["_preprocess_batch"]:
        batch = {"conversations": [CONVERSATIONS["sharegpt"], CONVERSATIONS["openai"]]}
        pattern = pre._detect_assistant_pattern(qwen36)
        out["_preprocess_batch/two_rows"] = call(pre._preprocess_batch, batch, qwen36, 256, pattern)
        empty = {"conversations": []}
        out["_preprocess_batch/no_rows"] = call(pre._preprocess_batch, empty, qwen36, 256, pattern)

    if hasattr(pre, "render_conversation"):  # 0.8+: a URL endpoint is upstream's own path
        out["render_conversation/unreachable"] = call(
            pre.render_conversation, UNREACHABLE, CONVERSATIONS["openai"],
            add_generation_prompt=False, timeout=5,
        )  # fmt: skip
        out["_render_conversation_rows/unreachable"] = call(
            pre._render_conversation_rows, CONVERSATIONS["openai"], None, 0, UNREACHABLE, 256
        )

    from datasets import Dataset, Features, Sequence, Value

    out["_visualize_sample/empty"] = call(
        pre._visualize_sample, Dataset.from_dict({"input_ids": [], "loss_mask": []}), tokenizer
    )
    row = Dataset.from_dict({"input_ids": [[1, 2, 3]], "loss_mask": [[0, 1, 1]]}).with_format(
        "torch"
    )
    out["_visualize_sample/one_row"] = call(pre._visualize_sample, row, tokenizer)

    if hasattr(pre, "_passthrough_pretokenized"):  # 0.7+: speculator-format rows
        passthrough = pre._passthrough_pretokenized
        rows = {
            "input_ids": [[1, 2, 3], [4, 5, 6, 7, 8, 9]],
            "loss_mask": [[0, 1, 1], [0] * 5 + [1]],
        }
        out["_passthrough_pretokenized/rows"] = call(passthrough, rows, 4)
        out["_passthrough_pretokenized/minimum"] = call(passthrough, rows, 8, 2)
        skewed = {"input_ids": [[1, 2, 3], [4, 5]], "loss_mask": [[0, 1, 1], [1]]}
        out["_passthrough_pretokenized/lengths_differ"] = call(passthrough, skewed, 8)

    def ids(values: list[int], dtype: str) -> Any:  # (datasets narrows "input_ids" itself)
        features = Features({"input_ids": Sequence(Value(dtype)), "seq_len": Value("int64")})
        return Dataset.from_dict({"input_ids": [values], "seq_len": [2]}, features=features)

    ids32, ids64 = ids([1, 2], "int32"), ids([3, 4], "int64")
    out["concatenate_datasets/same_types"] = call(pre.concatenate_datasets, [ids64, ids64])
    out["concatenate_datasets/int32_and_int64"] = call(pre.concatenate_datasets, [ids32, ids64])

    kwargs: dict[str, Any] = {"seq_length": 256, "build_dataset_num_proc": 1,
                              "token_freq_path": str(work / "token_freq.pt")}  # fmt: skip
    load = pre.load_and_preprocess_dataset
    no_reply = [{"conversations": CONVERSATIONS["sharegpt"][:1]}] * 2
    if "render_endpoint" in inspect.signature(load).parameters:  # 0.8+ render through a server
        kwargs["render_endpoint"] = UNREACHABLE
        out["load_and_preprocess_dataset/endpoint_unreachable"] = call(
            load, str(model), [str(write_jsonl(data / "sg.jsonl", sharegpt[:1]))], **kwargs
        )
    else:
        out["load_and_preprocess_dataset/sharegpt_rows"] = call(
            load, str(model), [str(write_jsonl(data / "sg.jsonl", sharegpt))], **kwargs
        )
        out["load_and_preprocess_dataset/nothing_to_train_on"] = call(
            load, str(model), [str(write_jsonl(data / "none.jsonl", no_reply))], **kwargs
        )

    try:
        cli = importlib.import_module("speculators.cli.prepare_data")
    except ImportError:
        cli = None
    allowed = getattr(cli, "PREPARE_DATA_OVERWRITE_ALLOWED_FILES", None)
    if allowed is not None:
        out["PREPARE_DATA_OVERWRITE_ALLOWED_FILES"] = {
            "raised": None,
            "shape": {"type": "set-like", "all_str": all(isinstance(n, str) for n in allowed)},
            "value": sorted(allowed),
            "unchanged": True,
        }
    return out


def _reads_folders(pre: Any) -> bool:
    return "is_dir()" in inspect.getsource(pre.load_raw_dataset)


def main(argv: list[str]) -> int:
    work, target = Path(argv[0]), Path(argv[1])
    work.mkdir(parents=True, exist_ok=True)
    results = probe(work)
    fixes_on = "speculators_qwen_compat" in sys.modules and _installed()
    target.write_text(json.dumps({"fixes_on": fixes_on, "cases": results}, indent=1))
    return 0


def _installed() -> bool:
    import speculators_qwen_compat
    from speculators_qwen_compat.core.fix import FixState

    status = {s.name: s.state for s in speculators_qwen_compat.status()}
    return any(state == FixState.APPLIED for state in status.values())


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main(sys.argv[1:]))
