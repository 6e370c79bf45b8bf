"""Which content shape a chat template gets, decided the way vLLM 0.32 decides it.

Why: vLLM hands content as a list of parts to a template that loops over it ("openai") and joins
text parts otherwise ("string"), while transformers passes it as given: local rendering shapes it
the same way to stay token-identical (render.py; docs/formats.md, "vLLM parity").
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
        from transformers.utils.chat_template_utils import _compile_jinja_template

        tree = _compile_jinja_template(template).environment.parse(template)
    except Exception:  # vLLM falls back to "string" for a template it cannot parse
        return STRING
    try:
        return OPENAI if _loops_over_content(tree) else STRING
    except Exception:
        return STRING


def _loops_over_content(tree: Any) -> bool:
    import jinja2.nodes as nodes

    message_names = set()
    for alias in _aliases(tree, "messages"):
        for loop in tree.find_all(nodes.For):
            if _reads(loop.iter, alias, None) and isinstance(loop.target, nodes.Name):
                message_names.add(loop.target.name)

    content_params: dict[int, set[str]] = {}  # id(loop inside a macro) -> content parameters
    in_macro: set[int] = set()
    for macro in tree.find_all(nodes.Macro):
        params = [arg.name for arg in macro.args]
        filled: set[str] = set()
        for call in tree.find_all(nodes.Call):
            if not (isinstance(call.node, nodes.Name) and call.node.name == macro.name):
                continue
            for i, arg in enumerate(call.args):
                if i < len(params) and any(_reads(arg, m, "content") for m in message_names):
                    filled.add(params[i])
            for kwarg in call.kwargs:
                if kwarg.key in params and any(
                    _reads(kwarg.value, m, "content") for m in message_names
                ):
                    filled.add(kwarg.key)
        for loop in macro.find_all(nodes.For):
            in_macro.add(id(loop))
            if filled:
                content_params[id(loop)] = filled

    for loop in tree.find_all(nodes.For):
        if any(_reads(loop.iter, m, "content") for m in message_names):
            return True
        if isinstance(loop.iter, nodes.Name):
            if loop.iter.name in content_params.get(id(loop), ()):
                return True
            if id(loop) not in in_macro and loop.iter.name == "content":
                return True
    return False


def _aliases(tree: Any, name: str) -> list[str]:
    """``name`` and every name assigned from it (``{% set msgs = messages %}``), transitively."""
    import jinja2.nodes as nodes

    found, queue = [name], [name]
    while queue:
        current = queue.pop(0)
        for assign in tree.find_all(nodes.Assign):
            if _reads(assign.node, current, None) and isinstance(assign.target, nodes.Name):
                found.append(assign.target.name)
                if assign.target.name != current:
                    queue.append(assign.target.name)
    return found


def _reads(node: Any, name: str, key: str | None) -> bool:
    """``node`` is ``name`` (or ``name.key`` / ``name['key']``), possibly filtered, tested or
    sliced."""
    import jinja2.nodes as nodes

    while isinstance(node, (nodes.Filter, nodes.Test)) or (
        isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Slice)
    ):
        if node.node is None:
            return False
        node = node.node
    if key is None:
        return _is_name(node, name)
    if isinstance(node, nodes.Getattr):
        return _is_name(node.node, name) and node.attr == key
    if isinstance(node, nodes.Getitem):
        return (
            _is_name(node.node, name)
            and isinstance(node.arg, nodes.Const)
            and node.arg.value == key
        )
    return False


def _is_name(node: Any, name: str) -> bool:
    import jinja2.nodes as nodes

    return isinstance(node, nodes.Name) and node.ctx == "load" and node.name == name


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
