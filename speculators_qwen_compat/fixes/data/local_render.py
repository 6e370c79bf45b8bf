"""Fix: ``--render-endpoint local`` renders in-process instead of needing a vLLM server.

Why: 0.8+ take loss masks only from vLLM's render endpoint (docs/upstream.md, "Local rendering").
Targets: ``render_conversation`` (local: data/render/render.py; a URL: render_faults.py's
retries), ``build_speculator_training_dataset``, ``render_client._post`` (pixel kwargs).
"""

from __future__ import annotations

from typing import Any

from speculators_qwen_compat.core.fix import Fix, Patcher, not_needed
from speculators_qwen_compat.core.targets import Found, ReleaseRange, Shape, Target, present
from speculators_qwen_compat.core.upstream import PREPROCESSING, bind, call
from speculators_qwen_compat.data.render import media, render_faults
from speculators_qwen_compat.data.render import render as local_renderer
from speculators_qwen_compat.fixes import route

LOCAL = "local"
RENDER_CLIENT = "speculators.data_generation.render_client"


def is_local(endpoint: Any) -> bool:
    return isinstance(endpoint, str) and (endpoint == LOCAL or endpoint.startswith(LOCAL + ":"))


RENDER = Target(
    PREPROCESSING,
    "render_conversation",
    params=("endpoint", "messages", "add_generation_prompt", "tools"),
)
#: upstream's one POST (render_client ``_post``, 0.8.1 :25, 0.9.0 :24): every render request's
#: body passes here, where ``--mm-processor-kwargs`` joins it as vLLM's ``mm_processor_kwargs``.
POST = Target(RENDER_CLIENT, "_post", params=("url", "json"), optional=True)
BUILD = Target(
    PREPROCESSING, "build_speculator_training_dataset", params=("render_endpoint", "processor")
)


class LocalRenderFix(Fix):
    name = "local_render"
    summary = "--render-endpoint local: render with the target's tokenizer, no vLLM server"
    modules = (PREPROCESSING,)
    shapes = (
        Shape(
            "render_conversation renders locally for --render-endpoint local",
            (BUILD, RENDER, POST),
            when=(present(PREPROCESSING, RENDER.path),),
        ),
    )
    otherwise = not_needed("this release renders with the local tokenizer already")
    applies_on = ReleaseRange("0.8.1", "0.9.0")

    def apply(self, found: Found, patcher: Patcher) -> None:
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
                # our retries instead of upstream's (with_retries): a failing server is
                # retried within a budget and then fails the run (data/render/render_faults.py)
                raw = getattr(wrapped, "__wrapped__", wrapped)
                return render_faults.render(lambda: call(raw, bound), str(endpoint))
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

        def post(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            extra = media.processor_kwargs()
            if not extra:
                return wrapped(*args, **kwargs)
            bound = bind(wrapped, args, kwargs)
            bound.arguments["json"] = {**bound.arguments["json"], "mm_processor_kwargs": extra}
            return call(wrapped, bound)

        if found.has(POST):
            patcher.wrap(*found.owner_and_name(POST), post)
        route.wrap(found, patcher, BUILD, self.name, build)
        patcher.wrap(*found.owner_and_name(RENDER), render)
