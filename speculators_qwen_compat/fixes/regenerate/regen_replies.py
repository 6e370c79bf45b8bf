"""Fix: regenerated replies keep what they earned and tool results answer their own call.

Target: ``regenerate_conversation`` (0.8+): results paired by position, reasoning dropped, a
conversation lost to one reply (docs/upstream.md, "Regenerate responses"). A planned row
(regen_turns.py) runs through regenerate/loop.py; an unplanned one through upstream's function.
"""

from __future__ import annotations

from typing import Any

from speculators_qwen_compat.core.fix import Fix, Patcher
from speculators_qwen_compat.core.targets import ReleaseRange, Resolved, Shape, Target
from speculators_qwen_compat.core.upstream import CLI_REGENERATE, arguments
from speculators_qwen_compat.regenerate import loop
from speculators_qwen_compat.regenerate.plan import Plan

CONVERSATION = Target(
    CLI_REGENERATE,
    "regenerate_conversation",
    params=(
        "post_fn", "item", "model", "max_tokens", "endpoint", "sampling_params", "samples",
        "detokenize", "reasoning_effort", "temperature",
    ),
)  # fmt: skip
SAMPLE = Target(
    CLI_REGENERATE,
    "_sample_from_response",
    params=(
        "data", "detokenize", "conv_id", "sample_index", "idx", "endpoint", "sampling_params",
    ),
)  # fmt: skip

TOOL_MESSAGE = Target(CLI_REGENERATE, "_tool_result_message", params=("tool_call", "content"))


class RegenRepliesFix(Fix):
    name = "regen_replies"
    summary = "regenerate-responses: pair tool results by name, keep reasoning and finished turns"
    modules = (CLI_REGENERATE,)
    shapes = (
        Shape(
            "regenerate_conversation replaced for planned rows",
            (CONVERSATION, SAMPLE, TOOL_MESSAGE),
        ),
    )
    applies_on = ReleaseRange("0.8.1", "0.9.0")

    def apply(self, found: Resolved, patcher: Patcher) -> None:
        owner, _ = found.owner_and_name(SAMPLE)

        def regenerate(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            given = arguments(wrapped, args, kwargs)  # once per conversation: no inspect
            item = given["item"]
            if not isinstance(item.get("turns"), Plan):
                return wrapped(*args, **kwargs)
            overrides = {
                key: given[key]
                for key in ("reasoning_effort", "temperature")
                if given[key] is not None
            }
            sample_args = {
                "detokenize": given["detokenize"],
                "conv_id": item["primary_id"],
                "idx": item["idx"],
                "endpoint": given["endpoint"],
            }
            endpoint = given["endpoint"]
            return loop.regenerate(
                given["post_fn"],
                item,
                model=given["model"],
                max_tokens=given["max_tokens"],
                sampling_params=given["sampling_params"],
                samples=given["samples"],
                # looked up per call: another fix may wrap it too
                sample_from_response=owner._sample_from_response,
                tool_result_message=owner._tool_result_message,
                sample_args=sample_args,
                overrides=overrides,
                probe=lambda: loop.probe_alive(endpoint),
            )

        patcher.wrap(*found.owner_and_name(CONVERSATION), regenerate)
