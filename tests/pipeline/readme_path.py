"""The README's path to a drafter, read from the README itself, with the user's things swapped
for the pipeline tier's (a tiny Qwen3.6-class checkpoint, its data, a loopback vLLM on CPU).

The README marks each step's fenced block with ``<!-- path: STEP -->`` on the line before it.
``steps()`` reads them (a command per logical line: ``\\`` continuations joined, comments cut);
``command(step, swap)`` returns one step's commands as argument lists with the substitutions
below applied. Nothing else is added to a user's command line except the CPU additions, each with
its reason: the tests run what the README says, so the README cannot drift from what works.

Substitutions (``Swap``: the user's -> the tier's):

| the user's (README) | the tier's | why |
|---|---|---|
| ``Qwen/Qwen3.6-27B`` | the tiny checkpoint's folder | no 27B weights here |
| ``chats.jsonl``, ``prepared``, ``replies.jsonl``, ``out/...`` | files in the stage's folder | |
| ``heldout.jsonl`` | the stage's text conversations | the drafter's server reads no images |
| ``/path/to/speculators-qwen-compat`` | this checkout | |
| ``http://127.0.0.1:8000`` | the tier's vLLM (a free port) | |
| ``/tmp/hidden-states`` (vLLM's scratch) | the stage's folder | |
| layer ids ``2 32 61`` / ``[2, 32, 61, 64]`` | ``AUX_LAYERS`` / ``LAYER_IDS`` | 8 layers, not 64 |
| ``--seq-length``, ``--total-seq-len`` 4096 | ``SEQ_LENGTH`` | the tiny model's window |
| ``--max-model-len`` 8192 or 32768 | 512 | |
| ``--concurrency`` 32 | 2 | one CPU vLLM on 2 cores |
| ``--max-tokens`` 16384 | 64 | a random model never stops thinking |

``--num-preprocessing-workers 8`` is run as written (eight map workers run fine on 2 cores).

CPU additions (``CPU``; tests/vllm_server.py and tests/cpu_trainer.py say why each is needed):
``vllm serve`` gets ``--enforce-eager --dtype bfloat16 --no-enable-prefix-caching`` and the CPU
copy of the hidden-states connector (``CpuHiddenStatesConnector``, a subclass of the stock one
loaded by ``kv_connector_module_path``); ``train`` gets one step of one layer on CPU
(``--max-steps 1 --epochs 1 --num-layers 1 --num-workers 0 --loss-implementation eager
--draft-attn-impl sdpa --logger ""``) and the CPU trainer shim on PYTHONPATH.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
STEP = re.compile(r"^<!-- path: ([\w-]+) -->\n```\w*\n(.*?)^```", re.DOTALL | re.MULTILINE)
#: The steps of the README's path, in its order.
STEPS = (
    "install", "status", "doctor", "regenerate", "prepare", "serve-target", "doctor-endpoint",
    "generate", "train-eagle3", "train-dflash", "train-online", "serve-drafter", "serve-dflash",
    "acceptance",
)  # fmt: skip
#: The user's values the README uses, and the sizes it gives (a flag's value).
USER_MODEL = "Qwen/Qwen3.6-27B"
USER_URL = "http://127.0.0.1:8000"
USER_STORAGE = "/tmp/hidden-states"
USER_CHECKOUT = "/path/to/speculators-qwen-compat"
USER_AUX = ["2", "32", "61"]
USER_LAYERS = [2, 32, 61, 64]
CONNECTOR = "ExampleHiddenStatesConnector"
#: The README's relative paths (and any under ``out/``): files in the stage's folder.
RELATIVE = ("prepared", "replies.jsonl")
#: What vLLM on CPU needs beside the user's command (tests/vllm_server.py).
CPU_SERVE = ("--enforce-eager", "--dtype", "bfloat16", "--no-enable-prefix-caching")
#: One step of one layer on CPU (tests/cpu_trainer.py is on the training's PYTHONPATH).
CPU_TRAIN = (
    "--max-steps", "1", "--epochs", "1", "--num-layers", "1", "--num-workers", "0",
    "--loss-implementation", "eager", "--draft-attn-impl", "sdpa", "--logger", "",
)  # fmt: skip


def steps(text: str | None = None) -> dict[str, list[list[str]]]:
    """Each marked step of the README: its commands, each a shell-split argument list."""
    text = README.read_text(encoding="utf-8") if text is None else text
    out: dict[str, list[list[str]]] = {}
    for name, body in STEP.findall(text):
        logical = body.replace("\\\n", " ")
        out[name] = [shlex.split(line, comments=True) for line in logical.splitlines()]
        out[name] = [c for c in out[name] if c]
    return out


@dataclass
class Swap:
    """The tier's values for the user's (see the module's table)."""

    model: Path
    work: Path  # relative paths of the README land here
    url: str = USER_URL
    storage: Path | None = None
    aux_layers: list[int] = field(default_factory=list)
    layers: list[int] = field(default_factory=list)
    sizes: dict[str, str] = field(default_factory=dict)
    paths: dict[str, Path] = field(default_factory=dict)  # the user's file -> the tier's

    def value(self, token: str) -> str:
        if token == USER_MODEL:
            return str(self.model)
        if token == USER_CHECKOUT:
            return str(ROOT)
        if token.startswith(USER_URL):
            return self.url + token[len(USER_URL) :]
        if token == USER_STORAGE and self.storage is not None:
            return str(self.storage)
        if token in self.paths:
            return str(self.paths[token])
        if token in RELATIVE or token.startswith("out/"):  # the README's relative paths
            return str(self.work / token)
        return token

    def json(self, value: Any) -> Any:
        if isinstance(value, dict):
            swapped = {key: self.json(item) for key, item in value.items()}
            if swapped.get("kv_connector") == CONNECTOR:  # the CPU copy (tests/vllm_site)
                swapped["kv_connector"] = "CpuHiddenStatesConnector"
                swapped["kv_connector_module_path"] = "cpu_connector"
            return swapped
        if value == USER_LAYERS:
            return list(self.layers)
        if isinstance(value, list):
            return [self.json(item) for item in value]
        return self.value(value) if isinstance(value, str) else value

    def args(self, tokens: list[str]) -> list[str]:
        out: list[str] = []
        rest = iter(tokens)
        for token in rest:
            if token in self.sizes:  # a size flag: the tier's value
                out += [token, self.sizes[token]]
                next(rest)
            elif token == "--target-layer-ids":
                given = [next(rest) for _ in USER_AUX]
                assert given == USER_AUX, given
                out += [token, *map(str, self.aux_layers)]
            elif token.startswith("{"):
                out.append(json.dumps(self.json(json.loads(token))))
            else:
                out.append(self.value(token))
        return out


def command(name: str, swap: Swap, text: str | None = None) -> list[list[str]]:
    """Step ``name``'s commands with ``swap`` applied (no CPU additions: see ``with_cpu``)."""
    return [swap.args(tokens) for tokens in steps(text)[name]]


def with_cpu(tokens: list[str]) -> list[str]:
    """A command with what the CPU run needs added (the module's CPU additions)."""
    if tokens[:2] == ["vllm", "serve"]:
        return [*tokens, *CPU_SERVE]
    if "speculators_qwen_compat.train" in tokens:
        return [*tokens, *CPU_TRAIN]
    return tokens
