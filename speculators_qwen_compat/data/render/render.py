"""Rendering a conversation to token ids in-process, exactly as vLLM 0.32's render endpoint does.

Target: vLLM 0.32's ``/v1/chat/completions/render``, which 0.8+ call for every loss mask: any id
difference corrupts a mask, so a request is shaped as the server shapes it (docs/formats.md, "vLLM
parity"). ``request_messages`` is the other half: what the HTTP path sends, as vLLM validates it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from speculators_qwen_compat.data.render import media, segment_encoder, vllm_tokenizer
from speculators_qwen_compat.data.render.content_format import OPENAI, content_format

_processors: dict[str, Any] = {}
REMOTE_CODE_MODULES = "transformers_modules."  # where transformers puts a repository's code


def remember(model_path: str, processor: Any) -> bool:
    """Reuse the processor the parent already loaded (forked map workers inherit it); True when
    it is the model's own code (the parent trusted it: spawned workers load it the same way)."""
    _processors[model_path] = processor
    tokenizer = getattr(processor, "tokenizer", processor)
    vllm_tokenizer.for_rendering(tokenizer)  # loaded once here, before map workers fork
    return any(type(o).__module__.startswith(REMOTE_CODE_MODULES) for o in (processor, tokenizer))


def processor_for(model_path: str, trust_remote_code: bool = False) -> Any:
    """The processor for a model path; loaded once per process (spawned workers), trusting the
    model's code exactly when the parent did (``trust_remote_code``)."""
    processor = _processors.get(model_path)
    if processor is None:
        from transformers import AutoProcessor

        processor = AutoProcessor.from_pretrained(model_path, trust_remote_code=trust_remote_code)
        _processors[model_path] = processor
    return processor


def render_ids(processor: Any, messages: list[dict[str, Any]], **request: Any) -> list[int]:
    """The token ids vLLM's render endpoint answers for this request (``request_ids``, the text
    tokenized by segment_encoder.py with the tokenizer vLLM builds for the checkpoint
    (data/render/vllm_tokenizer.py): the same ids as ``text_ids``, each piece once); each image
    placeholder expanded to the processor's count (data/render/media.py) before truncation, under
    ``mm_processor_kwargs`` as vLLM takes it per request (default: ``--mm-processor-kwargs``)."""
    urls = media.image_urls(messages)
    mm_kwargs = request.pop("mm_processor_kwargs", None)
    if not urls:
        return request_ids(processor, messages, _vllm_encode, **request)
    limit = request.pop("truncate_prompt_tokens", None)
    side = request.pop("truncation_side", None)
    ids = request_ids(processor, messages, _vllm_encode, **request)
    return media.expand(processor, ids, urls, limit, side, mm_kwargs)


def _vllm_encode(tokenizer: Any, text: str) -> list[int]:
    return segment_encoder.encode(vllm_tokenizer.for_rendering(tokenizer), text)


def request_ids(
    processor: Any,
    messages: list[dict[str, Any]],
    encode: Callable[[Any, str], list[int]],
    *,
    add_generation_prompt: bool,
    tools: list[dict[str, Any]] | None = None,
    chat_template_kwargs: dict[str, Any] | None = None,
    truncate_prompt_tokens: int | None = None,
    truncation_side: str | None = None,
) -> list[int]:
    """The token ids vLLM's render endpoint answers for this request, the template's text
    tokenized by ``encode(tokenizer, text)`` (``text_ids``, or an encoder giving its ids)."""
    template = getattr(processor, "chat_template", None)
    text = processor.apply_chat_template(
        template_messages(messages, template if isinstance(template, str) else None),
        tools=template_tools(tools),
        add_generation_prompt=add_generation_prompt,
        tokenize=False,
        **(chat_template_kwargs or {}),
    )
    ids = encode(getattr(processor, "tokenizer", processor), text)
    return truncated(ids, truncate_prompt_tokens, truncation_side)


def text_ids(tokenizer: Any, text: str) -> list[int]:
    """A rendered text's ids as vLLM tokenizes it: no special tokens added (the template wrote
    them)."""
    return list(tokenizer.encode(text, add_special_tokens=False))


def truncated(ids: list[int], limit: int | None, side: str | None) -> list[int]:
    """``ids`` cut to ``limit`` tokens as vLLM cuts a prompt: on the right unless ``side`` is
    "left" (never the tokenizer's own ``truncation_side``); a negative limit cuts nothing."""
    if limit is None or not 0 <= limit < len(ids):
        return ids
    return ids[len(ids) - limit :] if side == "left" else ids[:limit]


def template_messages(messages: list[dict[str, Any]], template: str | None) -> list[dict[str, Any]]:
    """The messages as vLLM hands them to the template (module docstring)."""
    openai = content_format(template) == OPENAI
    out = []
    for message in messages:
        role = message.get("role")
        content = _content(message.get("content"), openai)
        turn: dict[str, Any] = {"role": role, "content": content}
        if role == "assistant":
            calls = message.get("tool_calls")
            if isinstance(calls, list) and calls:
                turn["tool_calls"] = [_template_call(call) for call in calls]
            reasoning = message.get("reasoning")
            if reasoning is None:
                reasoning = message.get("reasoning_content")
            if reasoning is not None:
                turn["reasoning"] = turn["reasoning_content"] = reasoning
        elif role == "tool":
            if message.get("tool_call_id") is not None:
                turn["tool_call_id"] = message["tool_call_id"]
            if isinstance(content, list) and all(_is_text(part) for part in content):
                turn["content"] = "\n".join(part["text"] for part in content)
        if isinstance(message.get("name"), str):
            turn["name"] = message["name"]
        out.append(turn)
    if any(turn["role"] == "developer" for turn in out) and not _names_developer(template):
        out = _merge_system(out)
    return out


def template_tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Tools as vLLM hands them to the template."""
    if tools is None:
        return None
    out = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool.get("function"), Mapping) else {}
        entry = {
            "name": function.get("name"),
            "description": function.get("description"),
            "parameters": function.get("parameters"),
        }
        for key in ("strict", "defer_loading"):
            if function.get(key) is not None:
                entry[key] = function[key]
        out.append({"type": tool.get("type", "function"), "function": entry})
    return out


def arguments_as_mappings(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy whose tool-call arguments are mappings, for a template applied with transformers
    (speculators <= 0.7): JSON-string arguments parsed, as vLLM does before its template."""
    out = []
    for message in messages:
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls:
            message = {**message, "tool_calls": [_template_call(call) for call in calls]}
        out.append(message)
    return out


def request_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the HTTP path sends: tool calls in the shape vLLM's request validation accepts."""
    out = []
    for index, message in enumerate(messages):
        calls = message.get("tool_calls") if isinstance(message, Mapping) else None
        if isinstance(calls, list) and calls:
            calls = [_request_call(call, f"call_{index}_{k}") for k, call in enumerate(calls)]
            message = {**message, "tool_calls": calls}
        out.append(message)
    return out


def _content(content: Any, openai: bool) -> Any:
    if content is None:
        parts: list[Any] = []
    elif isinstance(content, str):
        parts = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        parts = [_part(part) for part in content]
    else:
        return content  # the template's own error ("Unexpected content type.")
    if openai:
        return parts
    if all(_is_text(part) for part in parts):
        return "\n".join(part["text"] for part in parts)
    return parts


def _part(part: Any) -> Any:
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if isinstance(part, Mapping) and part.get("type", "text") == "text" and "text" in part:
        return {"type": "text", "text": part["text"]}
    return part


def _is_text(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") == "text" and "text" in part


def _function(call: Mapping[str, Any]) -> Mapping[str, Any]:
    function = call.get("function")
    return function if isinstance(function, Mapping) else call


def _template_call(call: Any) -> Any:
    if not isinstance(call, Mapping):
        return call
    function = _function(call)
    arguments = function.get("arguments")
    if isinstance(arguments, str) and arguments:
        try:
            arguments = json.loads(arguments)
        except ValueError:
            arguments = {}
    if not arguments or not isinstance(arguments, Mapping):
        arguments = {}
    entry = {"type": call.get("type", "function"), "function": {**function, "arguments": arguments}}
    if "function" not in call:
        entry["function"] = {"name": function.get("name"), "arguments": arguments}
    if call.get("id") is not None:
        entry["id"] = call["id"]
    return entry


def _request_call(call: Any, default_id: str) -> Any:
    if not isinstance(call, Mapping):
        return call
    function = _function(call)
    arguments = function.get("arguments")
    if arguments is None:
        arguments = "{}"
    elif not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {
        "id": str(call.get("id") or default_id),
        "type": call.get("type") or "function",
        "function": {"name": function.get("name"), "arguments": arguments},
    }


def _names_developer(template: str | None) -> bool:
    return bool(template) and ("'developer'" in template or '"developer"' in template)


def _merge_system(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Developer turns as system, every system turn merged into one at the front."""
    texts, rest, merge = [], [], False
    for index, turn in enumerate(turns):
        if turn["role"] not in ("system", "developer"):
            rest.append(turn)
            continue
        if index > 0 or texts:
            merge = True
        content = turn.get("content")
        if isinstance(content, list):
            content = "\n".join(
                p["text"] if isinstance(p, Mapping) else p
                for p in content
                if isinstance(p, str) or (isinstance(p, Mapping) and "text" in p)
            )
        if content:
            texts.append(content)
    if not merge:
        return [{**t, "role": "system"} if t["role"] == "developer" else t for t in turns]
    return [{"role": "system", "content": "\n\n".join(texts)}, *rest]
