"""Local rendering gives exactly the ids of a real vLLM 0.32 render server (the parity corpus).

Quick tier (every release, no server): data/render/render.py on every case of
tests/parity_corpus.py, with this release's transformers and the real Qwen3.6 vocabulary, equals the
golden ids recorded from the server (tests/golden/vllm-0.32.0/), for the Qwen3.6- and Qwen3.5-style
templates; where the server refused a case (400, the template's own message) the local render must
raise the template's rejection (jinja2's TemplateError) with the same message: any other exception,
a TypeError of a bug included, is a mismatch (parity_corpus.mismatches).
Server tier (marked ``vllm``: tools/matrix.py runs it once, on the newest release; one server
per template for the session): the server renders the
corpus again through what our HTTP path sends; any drift from the golden ids is a failure (the
fixtures are never updated by the test), and local == server case by case.
"""

from __future__ import annotations

from typing import Any

import parity_corpus
import pytest
import vllm_server
from qwen_vocab import vocab_dir

from speculators_qwen_compat import demo
from speculators_qwen_compat.data.render.render import render_ids


def _local(tokenizer: Any, case: dict[str, Any]) -> dict[str, Any]:
    options = {k: v for k, v in case.items() if k != "messages"}
    return parity_corpus.local_answer(lambda: render_ids(tokenizer, case["messages"], **options))


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from transformers import AutoTokenizer

    out = {}
    for style in parity_corpus.STYLES:
        folder = tmp_path_factory.mktemp(f"parity-{style}")
        model = vllm_server.model_folder(folder, demo.chat_template(style), vocab_dir())
        out[style] = AutoTokenizer.from_pretrained(str(model))
    return out


def test_corpus_covers_what_speculators_sends() -> None:
    cases = parity_corpus.cases()
    assert len(cases) >= 50
    prompts = [c for c in cases.values() if c["add_generation_prompt"]]
    assert prompts and len(prompts) < len(cases)
    assert any("truncate_prompt_tokens" in c for c in cases.values())
    assert sum("tools" in c for c in cases.values()) >= 10


@pytest.mark.parametrize("style", parity_corpus.STYLES)
def test_local_rendering_matches_golden_server_ids(style: str, tokenizers: dict[str, Any]) -> None:
    golden = parity_corpus.load_golden(style, vllm_server.VLLM_VERSION)
    cases = parity_corpus.cases()
    assert set(golden) == set(cases), "golden fixtures out of date: re-record them"
    local = {name: _local(tokenizers[style], case) for name, case in cases.items()}
    assert parity_corpus.mismatches(local, golden) == []


@pytest.mark.vllm
@pytest.mark.parametrize("style", parity_corpus.STYLES)
def test_real_server_matches_golden_and_local(style: str, vllm_render: Any) -> None:
    from transformers import AutoTokenizer

    model, server = vllm_render(style)
    answers = parity_corpus.server_answers(server.render)
    golden = parity_corpus.load_golden(style, vllm_server.VLLM_VERSION)
    drift = [name for name in sorted(answers) if answers[name] != golden.get(name)]
    assert drift == [], f"vLLM {vllm_server.VLLM_VERSION} drifted from the golden ids"
    tokenizer = AutoTokenizer.from_pretrained(str(model))
    local = {name: _local(tokenizer, case) for name, case in parity_corpus.cases().items()}
    assert parity_corpus.mismatches(local, answers) == []
