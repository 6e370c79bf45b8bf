"""Rendering a conversation to token ids in-process, the way vLLM's render endpoint does.

``POST /v1/chat/completions/render`` on a text model applies the served chat template to the
messages (with the request's tools and chat-template kwargs), tokenizes the text without adding
special tokens, and, when asked (speculators 0.9 always asks), truncates to
``truncate_prompt_tokens`` on ``truncation_side``. The masks speculators 0.8+ derive compare token
prefixes of several renders, so this must give exactly those ids; text-parts content is joined
the way vLLM joins it for the template (content_format.py).
"""

from __future__ import annotations

from typing import Any

from speculators_qwen_compat.data.content_format import STRING, as_strings, content_format

_processors: dict[str, Any] = {}


def remember(model_path: str, processor: Any) -> None:
    """Reuse the processor the parent already loaded (forked map workers inherit it)."""
    _processors[model_path] = processor


def processor_for(model_path: str) -> Any:
    """The processor for a model path; loaded once per process (spawned workers)."""
    processor = _processors.get(model_path)
    if processor is None:
        from transformers import AutoProcessor

        processor = AutoProcessor.from_pretrained(model_path)
        _processors[model_path] = processor
    return processor


def render_ids(
    processor: Any,
    messages: list[dict[str, Any]],
    *,
    add_generation_prompt: bool,
    tools: list[dict[str, Any]] | None = None,
    chat_template_kwargs: dict[str, Any] | None = None,
    truncate_prompt_tokens: int | None = None,
    truncation_side: str | None = None,
) -> list[int]:
    template = getattr(processor, "chat_template", None)
    if isinstance(template, str) and content_format(template) == STRING:  # dicts: named templates
        messages = as_strings(messages)
    text = processor.apply_chat_template(
        messages,
        tools=tools,
        add_generation_prompt=add_generation_prompt,
        tokenize=False,
        **(chat_template_kwargs or {}),
    )
    tokenizer = getattr(processor, "tokenizer", processor)
    ids: list[int] = tokenizer.encode(text, add_special_tokens=False)
    if truncate_prompt_tokens is not None and 0 <= truncate_prompt_tokens < len(ids):
        if truncation_side == "left":
            ids = ids[len(ids) - truncate_prompt_tokens :]
        else:
            ids = ids[:truncate_prompt_tokens]
    return ids
