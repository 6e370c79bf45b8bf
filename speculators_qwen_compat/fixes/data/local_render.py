"""Fix: ``--render-endpoint local`` renders in-process instead of needing a vLLM server.

Releases: 0.8+ derive loss masks only from vLLM's ``/v1/chat/completions/render`` (docs/upstream.md
"Local rendering"): without a server serving the target, prepare_data cannot run at all.
Targets in ``preprocessing``:
- ``render_conversation(endpoint, messages, *, add_generation_prompt, tools=None, ...)``, bound
  from ``render_client`` (0.8.1 :19, 0.9.0 :18): an endpoint starting with ``local`` renders through
  data/render.py, token-identical to vLLM 0.32 for a text model; a URL goes to upstream with
  tool calls in the shape vLLM accepts (string arguments, an id and a type on every call: the
  data passes through the normaliser unchanged, and vLLM answers 400 to anything else).
- ``build_speculator_training_dataset(dataset, processor, ..., render_endpoint=...)``: with
  ``render_endpoint="local"`` it hands the processor it was given to the local renderer and
  passes ``local:<model path>`` on, so spawned map workers can load the same tokenizer.
Shape needed: both functions, the latter with a ``render_endpoint`` keyword.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from speculators_qwen_compat.core.fix import (
    Fits,
    Fix,
    Patcher,
    applies,
    not_applicable,
    not_needed,
)
from speculators_qwen_compat.core.upstream import PREPROCESSING, bind, call, missing
from speculators_qwen_compat.data import render as local_renderer

LOCAL = "local"


def is_local(endpoint: Any) -> bool:
    return isinstance(endpoint, str) and (endpoint == LOCAL or endpoint.startswith(LOCAL + ":"))


class LocalRenderFix(Fix):
    name = "local_render"
    summary = "--render-endpoint local: render with the target's tokenizer, no vLLM server"
    modules = (PREPROCESSING,)

    def fits(self, module_name: str, module: ModuleType) -> Fits:
        if not hasattr(module, "render_conversation"):
            return not_needed("this release renders with the local tokenizer already")
        build = getattr(module, "build_speculator_training_dataset", None)
        if build is None or missing(build, "render_endpoint", "processor"):
            return not_applicable(
                "no build_speculator_training_dataset(processor, render_endpoint)"
            )
        absent = missing(
            module.render_conversation, "endpoint", "messages", "add_generation_prompt", "tools"
        )
        if absent:
            return not_applicable(f"render_conversation takes no {', '.join(absent)}")
        return applies("render_conversation renders locally for --render-endpoint local")

    def apply(self, module_name: str, module: ModuleType, patcher: Patcher) -> None:
        def build(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            bound = bind(wrapped, args, kwargs)
            if bound.arguments["render_endpoint"] == LOCAL:
                processor = bound.arguments["processor"]
                tokenizer = getattr(processor, "tokenizer", processor)
                path = str(getattr(tokenizer, "name_or_path", "") or "")
                local_renderer.remember(path, processor)
                bound.arguments["render_endpoint"] = f"{LOCAL}:{path}"
            return call(wrapped, bound)

        def render(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            bound = bind(wrapped, args, kwargs)
            arguments = bound.arguments
            endpoint = arguments["endpoint"]
            messages = arguments["messages"]
            if not is_local(endpoint):
                if not isinstance(messages, list):
                    return wrapped(*args, **kwargs)
                # Tool calls in the shape vLLM validates (string arguments, id, type); the data
                # contract keeps them as the user wrote them.
                arguments["messages"] = local_renderer.request_messages(messages)
                return call(wrapped, bound)
            path = endpoint.partition(":")[2]
            return local_renderer.render_ids(
                local_renderer.processor_for(path),
                messages,
                add_generation_prompt=arguments["add_generation_prompt"],
                tools=arguments.get("tools"),
                chat_template_kwargs=arguments.get("chat_template_kwargs"),
                truncate_prompt_tokens=arguments.get("truncate_prompt_tokens"),
                truncation_side=arguments.get("truncation_side"),
            )

        patcher.wrap(module, "build_speculator_training_dataset", build)
        patcher.wrap(module, "render_conversation", render)
