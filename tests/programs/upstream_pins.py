"""Probes of the release as installed (run with the venv-wide .pth idle, test_upstream_pins.py):
``upstream_pins.py MODEL WORK``. MODEL is a Qwen3.6-style tokenizer folder; WORK a folder for
the probes' files. Prints one JSON line: probe name -> the probe's answer, or ``probe failed:
TYPE: MESSAGE`` when the probe itself raised. Each probe is a function of the release's
preprocessing module and the tokenizer: one start-up and one import for all of them."""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

#: What <= 0.7 take as the assistant pattern for ChatML templates (their scripts' default).
PATTERN = r"<\|im_start\|>assistant\n(.*?)<\|im_end\|>"
#: A port nothing listens on: 0.8+ need an endpoint argument but must not reach it here.
NO_SERVER = "http://127.0.0.1:9"
FAILED = "probe failed: "
#: A data folder's files whose order upstream's reader decides (test_data_order.py): sorted as
#: path strings "a-extra.jsonl" comes before "a/part.jsonl" ("-" < "/"); by path parts, after.
ORDER_FILES = (
    "a/part.jsonl", "a-extra.jsonl", "a0.jsonl", "A.jsonl", "a/b/deep.jsonl", "a.b.jsonl"
)  # fmt: skip


def write_order_folder(folder: Path) -> Path:
    """ORDER_FILES under ``folder``, two ShareGPT rows each, ids ``NAME#I``."""
    for name in ORDER_FILES:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = [
            {"id": f"{name}#{i}", "conversations": [
                {"from": "human", "value": "hi"}, {"from": "gpt", "value": f"{name} {i}"}]}
            for i in range(2)
        ]  # fmt: skip
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def mask_probe(P: ModuleType, tok: Any, work: Path) -> str:
    if not hasattr(P, "_supports_assistant_mask"):
        return "absent"
    try:
        return f"returned {P._supports_assistant_mask(tok)}"
    except Exception as exc:
        return f"raised {type(exc).__name__} {exc}"


def openai_messages(P: ModuleType, tok: Any, work: Path) -> str:
    data = work / "openai.jsonl"
    row = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    data.write_text("\n".join([json.dumps(row)] * 3) + "\n")
    parameters = inspect.signature(P.load_and_preprocess_dataset).parameters
    extra = (
        {"render_endpoint": NO_SERVER}
        if "render_endpoint" in parameters
        else {"assistant_pattern": PATTERN}
    )
    try:
        ds, _ = P.load_and_preprocess_dataset(
            tok.name_or_path, [str(data)], seq_length=256, build_dataset_num_proc=1,
            token_freq_path=str(work / "tf.pt"), **extra,
        )  # fmt: skip
        return f"rows {len(ds)}"
    except Exception as exc:
        return f"raised {type(exc).__name__} {str(exc)[:24]}"


def non_mapping_turn_kills_the_map(P: ModuleType, tok: Any, work: Path) -> str:
    batch = {
        "conversations": [
            [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}],
            ["not a turn"],
        ]
    }
    if hasattr(P, "_render_conversation_rows"):
        args: tuple = (batch, False, NO_SERVER, 256)
    else:
        args = (batch, tok, 256, PATTERN)
    try:
        P._preprocess_batch(*args)
        return "survived"
    except Exception as exc:
        return f"raised {type(exc).__name__}"


def template_error_in_one_row(P: ModuleType, tok: Any, work: Path) -> str:
    late_system = [
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "late"},
        {"role": "assistant", "content": "yo"},
    ]
    if hasattr(P, "_render_conversation_rows"):
        return "render-shape"
    try:
        out = P._preprocess_batch({"conversations": [late_system]}, tok, 256, PATTERN)
        return f"rows {len(out['input_ids'])}"
    except Exception as exc:
        return f"raised {type(exc).__name__} {exc}"


def normalisation_of_roles_reasoning_and_tool_calls(P: ModuleType, tok: Any, work: Path) -> str:
    call = {"type": "function", "function": {"name": "w", "arguments": '{"c": 1}'}}
    conv = [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "", "reasoning_content": "call it", "tool_calls": [call]},
    ]
    norm = P._normalize_conversation(conv)
    last = norm[-1]
    args = last.get("tool_calls", [{}])[0].get("function", {}).get("arguments")
    roles = [t["role"] for t in norm]
    return json.dumps([roles, "reasoning_content" in last, type(args).__name__])


def render_endpoint_is_required(P: ModuleType, tok: Any, work: Path) -> str:
    from datasets import Dataset

    if not hasattr(P, "build_speculator_training_dataset"):
        return "no-render"
    ds = Dataset.from_dict({"conversations": [[{"role": "user", "content": "hi"}]]})
    try:
        P.build_speculator_training_dataset(ds, tok, 256, 1, render_endpoint=None)
        return "built"
    except ValueError as exc:
        return f"raised {str(exc)[:30]}"


def folder_order(P: ModuleType, tok: Any, work: Path) -> str:
    """The ids upstream's ``load_raw_dataset`` reads from an ORDER_FILES folder, in its order."""
    folder = write_order_folder(work / "order")
    loaded = P.load_raw_dataset(str(folder))
    dataset = loaded[0] if isinstance(loaded, tuple) else loaded
    return json.dumps({"folder": str(folder), "ids": list(dataset["id"])})


PROBES: dict[str, Callable[[ModuleType, Any, Path], str]] = {
    probe.__name__: probe
    for probe in (
        mask_probe,
        openai_messages,
        non_mapping_turn_kills_the_map,
        template_error_in_one_row,
        normalisation_of_roles_reasoning_and_tool_calls,
        render_endpoint_is_required,
        folder_order,
    )
}


def main(argv: list[str]) -> int:
    model, work = argv[0], Path(argv[1])
    import speculators.data_generation.preprocessing as P
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    results = {}
    for name, probe in PROBES.items():
        try:
            results[name] = probe(P, tok, work)
        except BaseException as exc:
            results[name] = f"{FAILED}{type(exc).__name__}: {exc}"
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
