"""Write the benchmark's conversations: ``python make_data.py FOLDER COUNT SEED``.

``sharegpt.jsonl``: well-formed conversations from the demo's sample data in ShareGPT form (what
both prepare_data runs read). ``messages.jsonl``: the same conversations ready for a chat
template (OpenAI turns, tool-call arguments as objects), for the plain-loop floor.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from speculators_qwen_compat.demo.sample_data import good_conversations, to_sharegpt, write_jsonl


def template_ready(row: dict[str, Any]) -> dict[str, Any]:
    """The row with every tool call's JSON-string ``arguments`` parsed to an object."""
    messages = []
    for turn in row["messages"]:
        turn = dict(turn)
        if turn.get("tool_calls"):
            turn["tool_calls"] = [_parsed_call(call) for call in turn["tool_calls"]]
        messages.append(turn)
    return {**row, "messages": messages}


def _parsed_call(call: dict[str, Any]) -> dict[str, Any]:
    function = dict(call["function"])
    if isinstance(function.get("arguments"), str):
        function["arguments"] = json.loads(function["arguments"])
    return {**call, "function": function}


def main() -> None:
    folder, count, seed = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    rows = list(good_conversations(count, seed=seed))
    write_jsonl(folder / "sharegpt.jsonl", [to_sharegpt(row) for row in rows])
    write_jsonl(folder / "messages.jsonl", [template_ready(row) for row in rows])


if __name__ == "__main__":
    main()
