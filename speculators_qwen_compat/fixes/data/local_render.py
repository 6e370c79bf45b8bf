"""Fix: ``--render-endpoint local`` renders in-process instead of needing a vLLM server.

Why: 0.8+ take loss masks only from vLLM's render endpoint (docs/upstream.md, "Local rendering").
Targets: ``render_conversation`` (local: data/render/render.py; a URL: render_faults.py's
retries), ``build_speculator_training_dataset``, ``render_client._post`` (pixel kwargs).
"""

from __future__ import annotations

from speculators_qwen_compat.core.fix import not_needed
from speculators_qwen_compat.core.targets import ReleaseRange, Shape, Target, present
from speculators_qwen_compat.core.upstream import PREPROCESSING, RENDER_CLIENT
from speculators_qwen_compat.route.declaration import RouteFix

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


class LocalRenderFix(RouteFix):
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
