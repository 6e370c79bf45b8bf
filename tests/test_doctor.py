"""``python -m speculators_qwen_compat doctor``: the template profile, the mask strategy of the
installed release and a dry run over data, on the bundled demo model and sample files."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import PACKAGE_MAIN, RENDERS, good_rows, last_line, run_batch

from speculators_qwen_compat import demo
from speculators_qwen_compat.data.normalize.processor_media import NEEDS_PROCESSOR
from speculators_qwen_compat.demo.gallery import GALLERY_REJECTS, gallery_template
from speculators_qwen_compat.demo.sample_data import REJECTED_REASONS
from speculators_qwen_compat.doctor.command import marked_text
from speculators_qwen_compat.doctor.template_profile import profile_template

PREFIX = "speculators_qwen_compat: error: "


@pytest.fixture(scope="module")
def doctor_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The doctor runs of the tests below in one interpreter (conftest.run_batch), each with
    its own stdout, stderr and working directory: name -> result, and the paths they name."""
    work = tmp_path_factory.mktemp("doctor")
    paths = {"demo_cwd": work / "demo-cwd", "gen": work / "gen", "none": work / "no-such-model",
             "no_data": work / "none.jsonl"}  # fmt: skip
    paths["demo_cwd"].mkdir()
    model = demo.write_model(paths["gen"], template=gallery_template("generation_tags"))
    paths["images"] = _image_rows(work / "images.jsonl")
    paths["array"] = work / "array.json"
    paths["array"].write_text(json.dumps(good_rows(3), indent=2), encoding="utf-8")
    cases = {
        "demo": ["doctor", "--model", str(demo.MODEL_DIR), "--data", str(demo.OPENAI_SAMPLE),
                 "--data", str(demo.SHAREGPT_SAMPLE), "--seq-length", "512"],
        # The first 31 rows of the OpenAI sample: 30 good ones and an assistant-only one.
        "generation_tags": ["doctor", "--model", str(model), "--data", str(demo.OPENAI_SAMPLE),
                            "--rows", "31"],
        "images": ["doctor", "--model", str(demo.MODEL_DIR), "--data", str(paths["images"])],
        # a pretty-printed .json array: its rows span lines (doctor's sample is JSONL)
        "array": ["doctor", "--model", str(demo.MODEL_DIR), "--data", str(paths["array"])],
        "missing_model": ["doctor", "--model", str(paths["none"])],
        "missing_data": ["doctor", "--model", str(demo.MODEL_DIR), "--data",
                         str(paths["no_data"])],
    }  # fmt: skip
    results = run_batch(
        work / "logs", cases, dict.fromkeys(cases, PACKAGE_MAIN), {"demo": paths["demo_cwd"]}
    )
    return {"paths": paths, **results}


def _image_rows(path: Path) -> Path:
    """Three conversations about images (the files need not exist: a tokenizer reads none) and
    a text one."""
    rows = [
        [{"type": "image", "path": "/data/a.png"}],
        [{"type": "image", "url": "file:///data/b.png"}],
        [{"type": "image", "path": "/data/a.png"}, {"type": "image", "url": "file:///data/c.png"}],
        [],
    ]
    lines = []
    for parts in rows:
        user = {"role": "user", "content": [*parts, {"type": "text", "text": "What is it?"}]}
        lines.append({"messages": [user, {"role": "assistant", "content": "A picture."}]})
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return path


def _tokenizer(model: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model))


def test_demo_model_and_data(doctor_runs: dict[str, Any]) -> None:
    result = doctor_runs["demo"]
    tmp_path = doctor_runs["paths"]["demo_cwd"]  # its working directory
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    for line in (
        'needs a user turn:      yes: [assistant] alone raises "No user query found in messages."',
        "system must come first: yes: a system message after other turns raises "
        '"System message must be at the beginning."',
        "strict alternation:     no",
        "generation tags:        no",
        "generation prompt:      '<|im_start|>assistant\\n<think>\\n' (ends in an open <think>",
        "history reasoning:      dropped for turns before the last user query",
    ):
        assert f"  {line}" in out, out
    if RENDERS:
        assert "render boundary: one row per assistant turn" in out
    else:
        assert "regex pattern fallback" in out
        assert "<\\|im_start\\|>assistant\\n((?:(?!<\\|im_start\\|).)*?)<\\|im_end\\|>\\n" in out

    # Each sample file holds every rejected kind once, after 30 good conversations.
    skipped = Counter(REJECTED_REASONS.values())
    total = 2 * (30 + len(REJECTED_REASONS))
    assert f"data: first {total} of {total} rows" in out
    assert f"would keep 60 conversations as {90 if RENDERS else 60} rows" in out
    assert f"would skip {2 * sum(skipped.values())} of {total} conversations" in out
    for reason, count in skipped.items():
        assert f'    {2 * count} x "{reason}" (e.g. {demo.OPENAI_SAMPLE}:' in out
    assert "trainable text in [[ ]]" in out and "[[" in out
    assert list(tmp_path.iterdir()) == [], "doctor wrote something"


def test_a_pretty_printed_array_goes_through_prepare_data(doctor_runs: dict[str, Any]) -> None:
    result = doctor_runs["array"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert "prepare_data on these rows (--num-preprocessing-workers 8" in result.stdout
    assert ": exit 0" in result.stdout and "would keep 3 conversations" in result.stdout


def test_generation_tags_template_and_rows_limit(doctor_runs: dict[str, Any]) -> None:
    result = doctor_runs["generation_tags"]
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "  generation tags:        yes" in out
    assert "data: first 31 of 34 rows" in out
    assert f'    1 x "{GALLERY_REJECTS["generation_tags"]}"' in out
    if RENDERS:
        assert "render boundary" in out
    else:  # the fixed probe finds the tags: transformers' mask, closing token included
        assert "HF assistant mask" in out
        assert "<|im_end|>]]" in out


def test_image_conversations_with_a_tokenizer_only_target(doctor_runs: dict[str, Any]) -> None:
    """The demo model has no image processor: the run skips the image conversations (the count
    doctor shows), with a warning."""
    result = doctor_runs["images"]
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "media: 3 conversations with images or videos (4 images, 0 videos)" in out
    missing = [n for n in ("PIL", "torchvision") if importlib.util.find_spec(n) is None]
    assert ("not installed: the target's processor cannot read images" in out) == bool(missing)
    assert "would keep 1 conversations as 1 rows" in out
    assert "the run loads a tokenizer: image/video conversations are skipped" in out
    if RENDERS:  # local rendering refuses images for a target without an image processor
        assert '    3 x "the target has no image processor (a text-only checkpoint)"' in out
    else:
        assert f'    3 x "{NEEDS_PROCESSOR}"' in out


def test_missing_model_is_one_line(doctor_runs: dict[str, Any]) -> None:
    result = doctor_runs["missing_model"]
    missing = doctor_runs["paths"]["none"]
    assert result.returncode == 1
    assert last_line(result.stderr) == f"{PREFIX}--model {missing}: no such folder"
    assert result.stdout == ""


def test_missing_data_is_one_line(doctor_runs: dict[str, Any]) -> None:
    result = doctor_runs["missing_data"]
    missing = doctor_runs["paths"]["no_data"]
    assert result.returncode == 1
    assert last_line(result.stderr) == f"{PREFIX}--data {missing}: no such file"


@pytest.mark.parametrize(
    ("template", "user", "system_first", "alternation", "tags", "history"),
    [
        ("alternation", True, True, True, False, "kept"),
        ("system_first", False, True, False, False, "dropped"),
        ("generation_tags", True, False, False, True, "kept"),
        ("qwen35", True, True, False, False, "dropped"),
    ],
)
def test_profile_of_gallery_templates(
    tmp_path: Path,
    template: str,
    user: bool,
    system_first: bool,
    alternation: bool,
    tags: bool,
    history: str,
) -> None:
    text = demo.chat_template("qwen35") if template == "qwen35" else gallery_template(template)
    profile = profile_template(_tokenizer(demo.write_model(tmp_path, template=text)))
    assert profile.needs_user_turn == user
    assert profile.system_must_be_first == system_first
    assert profile.strict_alternation == alternation
    assert profile.generation_tags == tags
    assert profile.history_reasoning == history
    if template in GALLERY_REJECTS:
        assert GALLERY_REJECTS[template] in {
            profile.assistant_only_error,
            profile.late_system_error,
            profile.alternation_error,
        }
        assert profile.generation_prompt == "<|im_start|>assistant\n"
    else:  # Qwen3.5-small: thinking off, an empty think block pre-filled
        assert profile.generation_prompt == "<|im_start|>assistant\n<think>\n\n</think>\n\n"
        assert not profile.open_think


def test_marked_text_wraps_trainable_runs() -> None:
    tokenizer = _tokenizer(demo.MODEL_DIR)
    ids = tokenizer.encode("<|im_start|>assistant\nHello there<|im_end|>", add_special_tokens=False)
    mask = [0, 0, 0] + [1] * (len(ids) - 3)
    assert marked_text(tokenizer, ids, mask) == "<|im_start|>assistant\n[[Hello there<|im_end|>]]"
