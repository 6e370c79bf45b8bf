"""How text-parts content reaches a template in local rendering, decided as vLLM decides it."""

from __future__ import annotations

import pytest

from speculators_qwen_compat import demo
from speculators_qwen_compat.data.content_format import as_strings, content_format
from speculators_qwen_compat.demo.gallery import GALLERY, gallery_template

pytestmark = pytest.mark.pure  # release-independent: run once (tools/matrix.py)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{% for m in messages %}{% for p in m['content'] %}{{ p.text }}{% endfor %}"
         "{% endfor %}", "openai"),
        ("{% for m in messages %}{% set c = m.content %}{% for p in c %}{{ p.text }}"
         "{% endfor %}{% endfor %}", "openai"),
        ("{% for m in messages %}{{ m.content }}{% endfor %}", "string"),
        ("{% for m in messages %}{% for p in m.content | selectattr('type') %}{% endfor %}"
         "{% endfor %}", "openai"),
    ],
)  # fmt: skip
def test_loops_over_content_decide(template: str, expected: str) -> None:
    assert content_format(template) == expected


def test_bundled_templates_read_content_through_a_macro() -> None:
    templates = [demo.chat_template("qwen36"), demo.chat_template("qwen35")]
    templates += [gallery_template(name) for name in GALLERY]
    assert {content_format(t) for t in templates} == {"string"}


def test_as_strings_joins_text_parts_only() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
        {"role": "assistant", "content": "c"},
    ]
    out = as_strings(messages)
    assert out[0]["content"] == "a\nb"
    assert out[1:] == messages[1:]
