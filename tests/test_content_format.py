"""How text-parts content reaches a template in local rendering, decided as vLLM decides it."""

from __future__ import annotations

import pytest

from speculators_qwen_compat import demo
from speculators_qwen_compat.data.render.content_format import as_strings, content_format
from speculators_qwen_compat.demo.gallery import gallery_template

pytestmark = pytest.mark.pure  # release-independent: run once (tools/matrix.py)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{% for m in messages %}{% for p in m['content'] %}{{ p.text }}{% endfor %}"
         "{% endfor %}", "openai"),
        ("{% for m in messages %}{% for p in m.content | selectattr('type') %}{% endfor %}"
         "{% endfor %}", "openai"),
        ("{% set msgs = messages %}{% for m in msgs[::-1] %}{% for p in m.content %}{% endfor %}"
         "{% endfor %}", "openai"),
        # A macro parameter filled with message.content at a call, looped over in the macro.
        ("{% macro r(c, x) %}{% for p in c %}{{ p.text }}{% endfor %}{% endmacro %}"
         "{% for m in messages %}{{ r(m.content, true) }}{% endfor %}", "openai"),
        ("{% macro r(x, c=none) %}{% for p in c %}{% endfor %}{% endmacro %}"
         "{% for m in messages %}{{ r(1, c=m['content']) }}{% endfor %}", "openai"),
        # A plain name `content` looped over outside a macro.
        ("{% for m in messages %}{% set content = m.content %}{% for p in content %}{% endfor %}"
         "{% endfor %}", "openai"),
        # Not followed: another name assigned from content, a macro never given content.
        ("{% for m in messages %}{% set c = m.content %}{% for p in c %}{{ p.text }}"
         "{% endfor %}{% endfor %}", "string"),
        ("{% macro r(c) %}{% for p in c %}{% endfor %}{% endmacro %}{{ r(messages[0].content) }}"
         "{% for m in messages %}{{ m.content }}{% endfor %}", "string"),
        ("{% for m in messages %}{{ m.content }}{% endfor %}", "string"),
        ("{% for m in messages %", "string"),
    ],
)  # fmt: skip
def test_loops_over_content_decide(template: str, expected: str) -> None:
    assert content_format(template) == expected


def test_bundled_qwen_style_templates_are_openai_format() -> None:
    # vLLM 0.32 follows render_content(message.content)-style macros, as in Qwen3.5/3.6's own
    # templates: those and ours get parts lists (tests/test_vllm_parity.py checks the server).
    templates = [demo.chat_template("qwen36"), demo.chat_template("qwen35")]
    templates += [gallery_template(name) for name in ("alternation", "system_first")]
    assert {content_format(t) for t in templates} == {"openai"}
    assert content_format(gallery_template("generation_tags")) == "string"


def test_as_strings_joins_text_parts_only() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
        {"role": "assistant", "content": "c"},
    ]
    out = as_strings(messages)
    assert out[0]["content"] == "a\nb"
    assert out[1:] == messages[1:]
