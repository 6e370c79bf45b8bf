"""The checks tests/test_patches.py runs inside a patched speculators (patches/<release>/ applied).

Run as ``python -P tests/programs/patched_checks.py REQUEST.json`` (conftest.run_program) with the
patched ``src`` first on ``PYTHONPATH`` (then tests/ and the release's folder) and
``SPECULATORS_QWEN_COMPAT=0``, so the patched source shadows the installed release and none of the
package's run-time fixes is on. The request names the checks to run and their parameters; one JSON
object (each check's result under its name, with what identifies the interpreter) is printed last on
stdout. The checks share one interpreter because start-up (torch, transformers, datasets) is not
what they test. The package's modules used here (the normaliser, the corpora) are functions of their
arguments, and its fixes are off (``identity`` checks), so there is no package state to reset
between checks; the patched upstream's own state is said where it matters (``prepare``).
"""

from __future__ import annotations

import functools
import json
import logging
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Marks the start of each preparation run's lines on stderr.
RUN_MARK = "=== patched run: "


def _preprocessing() -> types.ModuleType:
    from speculators.data_generation import preprocessing

    return preprocessing


def identity(params: dict[str, Any]) -> dict[str, Any]:
    """Which speculators this is, and that it is the patched one with our hooks off."""
    import speculators

    P = _preprocessing()
    compat = sys.modules.get("speculators_qwen_compat")
    return {
        "speculators": speculators.__file__,
        "hooks": bool(compat and compat.installed())
        or not isinstance(P._preprocess_batch, types.FunctionType),
        "patched": hasattr(P, "conversation_rules"),
    }


def _outcome(normalize: Callable[[Any], Any], conv: Any) -> Any:
    try:
        return normalize(conv)
    except ValueError as exc:
        return f"{type(exc).__name__}: {exc}"


def units(params: dict[str, Any]) -> dict[str, Any]:
    """The normaliser's role table, reasoning, tool calls and rejections; the mask probe on a
    template that raises (<= 0.7); local rendering of a plain and a text-parts user turn."""
    from transformers import AutoTokenizer

    P = _preprocessing()
    norm = P._normalize_conversation
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    out: dict[str, Any] = {
        "normalized": _outcome(
            norm,
            [
                {"role": "developer", "content": "Be brief."},
                {"from": "human", "value": ["Weather in Paris?"]},
                {
                    "role": "assistant",
                    "content": "",
                    "reasoning_content": "Ask.",
                    "tool_calls": [call],
                },
                {"role": "function", "content": '{"t": 20}', "tool_call_id": "c1"},
                {"from": "gpt", "value": "Mild.", "thinking": "Report it."},
            ],
        ),
        "unknown": _outcome(
            norm,
            [
                {"role": "user", "content": "hi"},
                {"role": "narrator", "content": "meanwhile"},
                {"role": "assistant", "content": "yo"},
            ],
        ),
        "rejected": {
            "not a mapping": _outcome(norm, ["hello", {"role": "user", "content": "x"}]),
            "bad arguments": _outcome(
                norm,
                [
                    {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [{"name": "f", "arguments": "{oops"}],
                    }
                ],
            ),
        },
    }
    rules = P.conversation_rules
    if hasattr(rules, "arguments_as_mappings"):  # <= 0.7: the template is applied in-process
        out["for_template"] = rules.arguments_as_mappings(out["normalized"])
    if hasattr(P, "_supports_assistant_mask"):
        out["probe"] = _outcome(
            P._supports_assistant_mask, AutoTokenizer.from_pretrained(params["raising"])
        )
    if params["renders"]:
        out["renders"] = _local_renders(params)
    return out


def _local_renders(params: dict[str, Any]) -> dict[str, Any]:
    """What the patched local renderer answers, and the ids its oracle gives: the template
    applied by transformers to the messages as vLLM hands them over (a user turn's text parts
    stay a list for the Qwen templates, which loop over content in their render_content macro)."""
    from speculators.data_generation.render_client import render_conversation
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(params["model"])
    endpoint = "local:" + params["model"]
    plain = [{"role": "user", "content": "Hello there, how are you today?"}]
    parts = [
        {"role": "user", "content": [{"type": "text", "text": "First part."},
                                     {"type": "text", "text": "Second part."}]},
    ]  # fmt: skip
    out: dict[str, Any] = {}
    for name, messages in (("plain", plain), ("parts", parts)):
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        out[name] = {
            "text": text,
            "want": tokenizer.encode(text, add_special_tokens=False),
            "local": render_conversation(endpoint, messages, add_generation_prompt=True),
        }
    if params["truncates"]:
        out["left"], out["right"] = (
            render_conversation(endpoint, plain, add_generation_prompt=True,
                                truncate_prompt_tokens=5, truncation_side=side)
            for side in ("left", "right")
        )  # fmt: skip
        # no side asked, with a tokenizer whose own side is left: vLLM cuts on the right
        from speculators.data_generation import render_client

        left_handed = AutoTokenizer.from_pretrained(params["model"], truncation_side="left")
        try:
            out["unset"] = render_conversation(
                render_client.local_endpoint(left_handed), plain, add_generation_prompt=True,
                truncate_prompt_tokens=5,
            )  # fmt: skip
        finally:
            render_client._local_processors.clear()  # the next check loads its own
    return out


def _normalised(normalize: Callable[[Any], Any], conv: Any) -> dict[str, Any]:
    """A normaliser's outcome as a structure: ``{"kept": turns}``, or ``{"dropped": {"type",
    "data_problem", "reason"}}`` for its rejection of the conversation (a ``ValueError``: the
    package's and the patches' ``BadConversation``). Any other exception is a bug, not an
    outcome: it propagates and the check fails."""
    try:
        return {"kept": normalize(conv)}
    except ValueError as exc:
        return {
            "dropped": {
                "type": type(exc).__name__,
                "data_problem": getattr(exc, "data_problem", False),
                "reason": str(exc),
            }
        }


def same_corpus(params: dict[str, Any]) -> dict[str, Any]:
    """The hostile corpus (both formats) through the package's normaliser and the patched one:
    per row, each one's outcome (``_normalised``)."""
    from hostile_corpus import as_sharegpt, corpus

    from speculators_qwen_compat.data.normalize.normalize import (
        BadConversation,
        normalize_conversation,
        pick_conversation,
    )

    P = _preprocessing()
    pairs = {}
    for kind, (row, _) in corpus(params["renders"]).items():
        for form, data in (("openai", row), ("sharegpt", as_sharegpt(row))):
            try:
                conv = pick_conversation(data)
            except BadConversation:
                continue  # no conversation at all: the row never reaches a normaliser
            pairs[f"{kind}/{form}"] = [
                _normalised(normalize_conversation, conv),
                _normalised(P._normalize_conversation, conv),
            ]
    return pairs


def golden(params: dict[str, Any]) -> dict[str, Any]:
    """Every case of the vLLM parity corpus rendered by the patched local renderer (0.8+), per
    template style: ``parity_corpus.local_answer``, the ids or the kind of error raised (a case
    the server rejected must raise the template's rejection)."""
    import parity_corpus
    from speculators.data_generation.render_client import render_conversation

    out: dict[str, Any] = {}
    for style, model in params["models"].items():
        answers = {}
        for name, case in parity_corpus.cases().items():
            options = {k: v for k, v in case.items() if k != "messages"}
            if not params["truncates"]:  # 0.8 sends no truncation fields
                options.pop("truncate_prompt_tokens", None)
                options.pop("truncation_side", None)
            answers[name] = parity_corpus.local_answer(
                functools.partial(
                    render_conversation, "local:" + model, case["messages"], **options
                )
            )
        out[style] = answers
    return out


def prepare(params: dict[str, Any]) -> dict[str, Any]:
    """``load_and_preprocess_dataset`` once per run, one after the other; each run's stderr lines
    follow a ``RUN_MARK`` line. State the runs share: the processor cache of local rendering
    (the same model, loaded once either way) and the set of unknown-role notes already logged,
    which is emptied before each run so each run logs its own."""
    P = _preprocessing()
    rows = {}
    for name, run in params["runs"].items():
        P._logged_notes.clear()
        print(RUN_MARK + name, file=sys.stderr, flush=True)
        dataset, _ = P.load_and_preprocess_dataset(**run["kwargs"])
        dataset.save_to_disk(run["output"])
        rows[name] = len(dataset)
    return rows


def prepare_each(params: dict[str, Any]) -> dict[str, Any]:
    """``load_and_preprocess_dataset`` on each file of ``params["files"]`` on its own (a file
    upstream's loader cannot read fails only its own call): per file, the rows written to its
    output folder, or the error. Shared state as in ``prepare``."""
    P = _preprocessing()
    out: dict[str, Any] = {}
    for name, run in params["each"].items():
        P._logged_notes.clear()
        try:
            dataset, _ = P.load_and_preprocess_dataset(**run["kwargs"])
        except Exception as exc:
            out[name] = f"{type(exc).__name__}: {str(exc)[:200]}"
            continue
        if len(dataset):  # datasets cannot save an empty one
            dataset.save_to_disk(run["output"])
        out[name] = len(dataset)
    return out


CHECKS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "prepare_each": prepare_each,
    "units": units,
    "same_corpus": same_corpus,
    "golden": golden,
    "prepare": prepare,
}


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text("utf-8"))
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    params = request["params"]
    out = {"identity": identity(params)}
    for check in request["checks"]:
        out[check] = CHECKS[check](params)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
