"""Which content shape a chat template expects, decided the way vLLM decides it.

vLLM's chat endpoints (``/render`` included) look at the template's syntax tree: a template that
loops over a message's ``content`` itself gets OpenAI-style parts lists ("openai"); any other gets
plain strings ("string"), and a text-parts list is joined with newlines before rendering. Qwen
templates read content through a macro argument, which that check does not follow, so they get
strings. transformers passes lists through unchanged, so local rendering must do the join itself
to stay token-identical to the server.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

STRING, OPENAI = "string", "openai"


@lru_cache(maxsize=16)
def content_format(template: str | None) -> str:
    if not template:
        return STRING
    try:
        import jinja2.nodes as nodes
        from transformers.utils.chat_template_utils import _compile_jinja_template

        tree = _compile_jinja_template(template).environment.parse(template)
    except Exception:  # an unparsable template renders nothing either; keep lists as given
        return OPENAI
    message_names = {"message"} | {
        loop.target.name
        for loop in tree.find_all(nodes.For)
        if isinstance(loop.target, nodes.Name) and _reads(loop.iter, {"messages"}, None)
    }
    content_names = {
        assign.target.name
        for assign in tree.find_all(nodes.Assign)
        if isinstance(assign.target, nodes.Name) and _reads(assign.node, message_names, "content")
    }
    for loop in tree.find_all(nodes.For):
        if _reads(loop.iter, message_names, "content") or _reads(loop.iter, content_names, None):
            return OPENAI
    return STRING


def _reads(node: Any, names: set[str], key: str | None) -> bool:
    """``node`` is ``name``, or ``name.key`` / ``name['key']``, possibly filtered or sliced."""
    import jinja2.nodes as nodes

    while isinstance(node, (nodes.Filter, nodes.Test)) or (
        isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Slice)
    ):
        if node.node is None:
            return False
        node = node.node
    if key is None:
        return isinstance(node, nodes.Name) and node.name in names
    if isinstance(node, nodes.Getattr):
        return isinstance(node.node, nodes.Name) and node.node.name in names and node.attr == key
    if isinstance(node, nodes.Getitem):
        return (
            isinstance(node.node, nodes.Name)
            and node.node.name in names
            and isinstance(node.arg, nodes.Const)
            and node.arg.value == key
        )
    return False


def as_strings(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Text-parts lists joined with newlines, as vLLM sends them to a "string" template."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and all(
            isinstance(p, dict) and p.get("type") == "text" for p in content
        ):
            message = {**message, "content": "\n".join(p.get("text", "") for p in content)}
        out.append(message)
    return out
