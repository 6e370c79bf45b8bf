"""What ``--render-endpoint`` names for a 0.8+ release: ``local`` (rendered in this process with the
target's processor, render.py) or a vLLM server (each request retried within a budget, then the
run fails: render_faults.py). Local runs hand the model's path to the map workers in upstream's
own argument, ``local:<path>``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.data.render import media, render_faults
from speculators_qwen_compat.data.render import render as local_renderer

LOCAL = "local"
#: ``local`` for a model whose processor is its own code, which the parent trusted.
TRUSTED = "local-trusted"


def is_local(endpoint: Any) -> bool:
    return isinstance(endpoint, str) and (
        endpoint == LOCAL or endpoint.startswith((f"{LOCAL}:", f"{TRUSTED}:"))
    )


def refuse_workers_form(given: Any) -> None:
    """``local:PATH``/``local-trusted:PATH`` is how the map workers get ``local``: given by a user
    it would render with another model's tokenizer than the run's, or run that model's own code
    without --trust-remote-code."""
    if given != LOCAL and is_local(given):
        raise CompatError(
            f"--render-endpoint {given}: name local alone (the run's --model renders) or a "
            "vLLM server's URL"
        )


def for_workers(given: Any, processor: Any) -> Any:
    """``--render-endpoint`` as the map workers get it: ``local`` becomes ``local:<path>``
    (``local_endpoint``), a server stays as given, the workers' own form is refused."""
    if given == LOCAL:
        return local_endpoint(processor)
    refuse_workers_form(given)
    return given


def local_endpoint(processor: Any) -> str:
    """``local`` as the map workers get it: ``local:<the model's path>`` (``local-trusted:``
    when the processor is the model's own code), the processor the parent loaded remembered
    for them (forked workers inherit it; spawned ones load it, trusting it as the parent did)."""
    tokenizer = getattr(processor, "tokenizer", processor)
    path = str(getattr(tokenizer, "name_or_path", "") or "")
    trusted = local_renderer.remember(path, processor)
    return f"{TRUSTED if trusted else LOCAL}:{path}"


def processor_of(endpoint: str) -> Any:
    """The processor a local endpoint names, as this process has it or loads it."""
    kind, _, path = endpoint.partition(":")
    return local_renderer.processor_for(path, trust_remote_code=kind == TRUSTED)


def render(arguments: dict[str, Any]) -> list[int]:
    """A local ``render_conversation`` call answered in-process, as vLLM's endpoint answers."""
    return local_renderer.render_ids(
        processor_of(arguments["endpoint"]),
        arguments["messages"],
        add_generation_prompt=arguments["add_generation_prompt"],
        tools=arguments.get("tools"),
        chat_template_kwargs=arguments.get("chat_template_kwargs"),
        truncate_prompt_tokens=arguments.get("truncate_prompt_tokens"),
        truncation_side=arguments.get("truncation_side"),
    )


def from_server(request: Callable[[], Any], arguments: dict[str, Any]) -> Any:
    """A ``render_conversation`` call to a server: tool calls in the shape vLLM validates (string
    arguments, id, type; the data keeps them as the user wrote them), and our retries instead of
    upstream's (``request``: upstream's call without its ``with_retries``, after the edit)."""
    arguments["messages"] = local_renderer.request_messages(arguments["messages"])
    return render_faults.render(request, str(arguments["endpoint"]))


def with_processor_kwargs(body: dict[str, Any]) -> dict[str, Any]:
    """A render request's body with ``--mm-processor-kwargs`` as vLLM's ``mm_processor_kwargs``
    (the body as it was without the flag)."""
    extra = media.processor_kwargs()
    return {**body, "mm_processor_kwargs": extra} if extra else body
