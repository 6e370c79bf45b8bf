"""The source patches in patches/<release>/, against the installed release's own source.

The release is laid out as the upstream repository has it (tools/release_source.py), from the
installed release's own files (.venvs/rel/<release>/site-packages/speculators hold the wheel's
files unchanged), so nothing is downloaded during the tests. Every patch must pass ``git apply
--check`` and apply, in order; the patched speculators then runs in a subprocess of this venv's
Python with our run-time hooks off (``SPECULATORS_QWEN_COMPAT=0``) and the patched ``src`` first
on ``PYTHONPATH``, so it shadows the installed release. Data preparation must keep every good
conversation with the right mask and leave out the rejected ones, in both formats, with two map
workers; the patches' normaliser and the package's must treat the hostile corpus alike.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import (
    RELEASE,
    RENDERS,
    as_written,
    good_rows,
    rejected_rows,
    subprocess_env,
    write_dataset,
)
from mask_oracle import check_masks, load_rows
from packaging.version import Version

from speculators_qwen_compat import demo
from speculators_qwen_compat.demo.sample_data import REJECTED_REASONS

ROOT = Path(__file__).resolve().parents[1]
SEQ_LENGTH = 512
#: A template that rejects every conversation, as a strict one rejects the mask probe's.
RAISING_TEMPLATE = "{{ raise_exception('No user query found in messages.') }}"
WITH_TOOLS = Version("0.7") <= RELEASE  # 0.7+ pass a row's tools column to the template


def _release_source() -> ModuleType:
    """tools/release_source.py (tools/ is not a package)."""
    path = ROOT / "tools" / "release_source.py"
    spec = importlib.util.spec_from_file_location("release_source", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


release_source = _release_source()


def needed_fixes(release: Version) -> set[str]:
    """The patches a release must have: the fix docstrings and docs/upstream.md say why."""
    fixes = {"normalize-turns", "messages-column"}
    if release < Version("0.8"):
        fixes.add("mask-probe")  # _supports_assistant_mask lets TemplateError escape
    if release < Version("0.7"):
        fixes.add("row-guard")  # per-row except misses TemplateError
    if release >= Version("0.8"):
        fixes.add("local-render")  # masks need a vLLM server otherwise
    return fixes


@dataclass
class PatchedSource:
    src: Path
    problem: str | None  # why the patches did not all apply, if they did not


@pytest.fixture(scope="module")
def patched(tmp_path_factory: pytest.TempPathFactory) -> PatchedSource:
    """The release laid out as upstream's repository, with its patches applied in order."""
    layout = tmp_path_factory.mktemp(f"speculators-{RELEASE}")
    import speculators

    installed = Path(speculators.__file__).parent
    release_source.lay_out(str(RELEASE), layout, git=True, installed=installed)
    patches = release_source.release_patches(str(RELEASE))
    if not patches:
        return PatchedSource(layout / "src", f"no patches in patches/{RELEASE}/")
    for patch in patches:
        for step in (["--check"], []):
            result = subprocess.run(
                ["git", "apply", *step, str(patch)], cwd=layout, capture_output=True, text=True
            )
            if result.returncode != 0:
                problem = f"git apply {' '.join(step)} {patch.name}: {result.stderr.strip()}"
                return PatchedSource(layout / "src", problem)
    return PatchedSource(layout / "src", None)


def _src(patched: PatchedSource) -> Path:
    if patched.problem:
        pytest.fail(patched.problem)
    return patched.src


def _first_on_path(src: Path) -> str:
    """The patched source first; the release's folder (transformers, datasets) behind it."""
    return os.pathsep.join(p for p in (str(src), os.environ.get("PYTHONPATH", "")) if p)


def _run_patched(src: Path, code: str, params: dict[str, Any], cwd: Path) -> dict[str, Any]:
    """Run ``code`` against the patched source, hooks off; it prints one JSON line last."""
    result = subprocess.run(
        [sys.executable, "-P", "-c", PRELUDE + code, json.dumps(params)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=subprocess_env(SPECULATORS_QWEN_COMPAT="0", PYTHONPATH=_first_on_path(src)),
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert Path(out["speculators"]).is_relative_to(src), out["speculators"]
    assert not out["hooks"], "speculators_qwen_compat's run-time hooks were on"
    assert out["patched"], "preprocessing lacks the patches' UnusableConversationError"
    out["stderr"] = result.stderr
    return out


PRELUDE = """
import json, logging, sys, types
logging.basicConfig(level=logging.WARNING, format="%(message)s")
params = json.loads(sys.argv[1])
import speculators
from speculators.data_generation import preprocessing as P
compat = sys.modules.get("speculators_qwen_compat")
out = {
    "speculators": speculators.__file__,
    "hooks": bool(compat and compat.installed())
    or not isinstance(P._preprocess_batch, types.FunctionType),
    "patched": hasattr(P, "UnusableConversationError"),
}
"""

#: Marks the start of each run's lines on stderr when one interpreter does several runs.
RUN_MARK = "=== patched run: "

PREPARE = """
out["rows"] = {}
for name, run in params["runs"].items():
    print(RUN_MARK + name, file=sys.stderr, flush=True)
    dataset, _ = P.load_and_preprocess_dataset(**run["kwargs"])
    dataset.save_to_disk(run["output"])
    out["rows"][name] = len(dataset)
print(json.dumps(out))
""".replace("RUN_MARK", repr(RUN_MARK))

UNITS = """
def outcome(conv):
    try:
        return P._normalize_conversation(conv)
    except ValueError as exc:
        return f"{type(exc).__name__}: {exc}"

call = {"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
out["normalized"] = outcome([
    {"role": "developer", "content": "Be brief."},
    {"from": "human", "value": ["Weather in Paris?"]},
    {"role": "assistant", "content": "", "reasoning_content": "Ask.", "tool_calls": [call]},
    {"role": "function", "content": '{"t": 20}', "tool_call_id": "c1"},
    {"from": "gpt", "value": "Mild.", "thinking": "Report it."},
])
out["unknown"] = outcome([{"role": "user", "content": "hi"},
                          {"role": "narrator", "content": "meanwhile"},
                          {"role": "assistant", "content": "yo"}])
out["rejected"] = {
    "not a mapping": outcome(["hello", {"role": "user", "content": "x"}]),
    "bad arguments": outcome([{"role": "assistant", "content": "",
                               "tool_calls": [{"name": "f", "arguments": "{oops"}]}]),
}
if hasattr(P, "_arguments_as_mappings"):  # <= 0.7: the template is applied in-process
    out["for_template"] = P._arguments_as_mappings(out["normalized"])
from transformers import AutoTokenizer
if hasattr(P, "_supports_assistant_mask"):
    try:
        out["probe"] = P._supports_assistant_mask(AutoTokenizer.from_pretrained(params["raising"]))
    except Exception as exc:
        out["probe"] = f"{type(exc).__name__}: {exc}"
if params["renders"]:
    from speculators.data_generation.render_client import render_conversation
    tok = AutoTokenizer.from_pretrained(params["model"])
    msgs = [{"role": "user", "content": "Hello there, how are you today?"}]
    text = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    out["want"] = tok.encode(text, add_special_tokens=False)
    endpoint = "local:" + params["model"]
    out["local"] = render_conversation(endpoint, msgs, add_generation_prompt=True)
    if params["truncates"]:
        out["left"], out["right"] = (
            render_conversation(endpoint, msgs, add_generation_prompt=True,
                                truncate_prompt_tokens=5, truncation_side=side)
            for side in ("left", "right")
        )
"""


def test_release_has_the_patches_it_needs() -> None:
    patches = release_source.release_patches(str(RELEASE))
    assert patches, f"no patches for the installed speculators {RELEASE} in patches/{RELEASE}/"
    names = {patch.stem.partition("-")[2] for patch in patches}
    assert needed_fixes(RELEASE) <= names, f"missing: {needed_fixes(RELEASE) - names}"
    numbers = [patch.name[:4] for patch in patches]
    assert numbers == [f"{n:04d}" for n in range(1, len(patches) + 1)]


def test_patches_apply_in_order(patched: PatchedSource) -> None:
    assert patched.problem is None, patched.problem


@pytest.fixture(scope="module")
def units(
    patched: PatchedSource, qwen36_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any] | None:
    """UNITS and SAME_CORPUS in one interpreter of the patched source (None when the patches
    did not apply: the tests then fail with the reason)."""
    if patched.problem:
        return None
    work = tmp_path_factory.mktemp("units")
    raising = demo.write_model(work / "raising", template=RAISING_TEMPLATE)
    params = {
        "model": str(qwen36_dir),
        "raising": str(raising),
        "renders": RENDERS,
        "truncates": Version("0.9") <= RELEASE,  # 0.9 sends truncate_prompt_tokens
        "tests": str(ROOT / "tests"),
    }
    code = UNITS + SAME_CORPUS + "print(json.dumps(out))\n"
    return _run_patched(patched.src, code, params, cwd=work)


def test_probe_normalizer_and_local_render(
    patched: PatchedSource, units: dict[str, Any] | None
) -> None:
    _src(patched)
    assert units is not None
    out = units
    params = {"truncates": Version("0.9") <= RELEASE}

    if not RENDERS:  # the probe's template error means "no HF assistant mask"
        assert out["probe"] is False, out["probe"]

    turns = out["normalized"]
    assert [t["role"] for t in turns] == ["system", "user", "assistant", "tool", "assistant"]
    assert turns[1]["content"] == [{"type": "text", "text": "Weather in Paris?"}]
    # tool calls pass through unchanged (upstream's contract); <= 0.7 parse the arguments
    # where the template is applied, 0.8+ where a local render applies it (vLLM parses them)
    assert turns[2]["tool_calls"] == [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
    ]
    if not RENDERS:
        arguments = out["for_template"][2]["tool_calls"][0]["function"]["arguments"]
        assert arguments == {"city": "Paris"}
    assert turns[3]["tool_call_id"] == "c1"
    for turn, reasoning in ((turns[2], "Ask."), (turns[4], "Report it.")):
        assert turn["reasoning_content"] == turn["thinking"] == reasoning
    rejected = out["rejected"]
    # a role outside the table keeps the release's meaning: dropped <= 0.7, assistant 0.8+
    roles = [t["role"] for t in out["unknown"]]
    assert roles == (["user", "assistant", "assistant"] if RENDERS else ["user", "assistant"])
    assert rejected["not a mapping"] == "UnusableConversationError: turn is not a mapping (str)"
    assert rejected["bad arguments"].endswith("tool call arguments are not valid JSON")

    if RENDERS:
        assert out["local"] == out["want"]
    if params["truncates"]:
        assert out["left"] == out["want"][-5:]
        assert out["right"] == out["want"][:5]


@pytest.fixture(scope="module")
def prepared(
    patched: PatchedSource, qwen36_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any] | None:
    """Both formats' data preparation, one after the other in one interpreter of the patched
    source: per format its output folder, rows, rejected rows and its own stderr lines."""
    if patched.problem:
        return None
    work = tmp_path_factory.mktemp("prepare")
    good = good_rows(24)
    rejected = rejected_rows()
    rows = good[:12] + [row for _, row in rejected] + good[12:]
    runs: dict[str, Any] = {}
    for sharegpt in (False, True):
        name = "sharegpt" if sharegpt else "openai"
        folder = work / name
        folder.mkdir()
        data = write_dataset(folder / "data.jsonl", rows, sharegpt=sharegpt)
        kwargs: dict[str, Any] = {
            "target_model_path": str(qwen36_dir),
            "train_data_paths": [str(data)],
            "seq_length": SEQ_LENGTH,
            "build_dataset_num_proc": 2,
            "token_freq_path": str(folder / "token_freq.pt"),
        }
        if RENDERS:
            kwargs["render_endpoint"] = "local"
        runs[name] = {"kwargs": kwargs, "output": str(folder / "out")}
    out = _run_patched(patched.src, PREPARE, {"runs": runs}, cwd=work)
    parts = out["stderr"].split(RUN_MARK)[1:]
    stderr = {part.split("\n", 1)[0]: part for part in parts}
    assert sorted(stderr) == sorted(runs), out["stderr"][-3000:]
    return {
        name: {
            "rows": out["rows"][name], "stderr": stderr[name], "output": Path(run["output"]),
            "good": good, "rejected": rejected, "all": rows,
        }
        for name, run in runs.items()
    }  # fmt: skip


@pytest.mark.parametrize("sharegpt", [False, True], ids=["openai", "sharegpt"])
def test_prepare_with_rejected_rows(
    patched: PatchedSource, prepared: dict[str, Any] | None, qwen36_dir: Path, sharegpt: bool
) -> None:
    _src(patched)
    assert prepared is not None
    out = prepared["sharegpt" if sharegpt else "openai"]
    output, good, rejected, rows = out["output"], out["good"], out["rejected"], out["all"]

    # every good row, right mask; no other
    good = as_written(good, sharegpt)
    expected = check_masks(qwen36_dir, load_rows(output), good, RENDERS, with_tools=WITH_TOOLS)
    assert out["rows"] == expected

    for reason in {REJECTED_REASONS[kind] for kind, _ in rejected}:
        assert reason in out["stderr"], f"rejection not logged: {reason}"
    if Version("0.7") > RELEASE:  # the row-guard patch counts skips per batch and per source
        assert f"Dropped {len(rejected)}/{len(rows)} samples" in out["stderr"]
        assert _batch_skips(out["stderr"]) == len(rejected)


def _batch_skips(stderr: str) -> int:
    """Skipped conversations, added up over the per-batch summary lines
    (``Skipped 4/14 conversations in this batch: 2 x '...', ...``)."""
    skipped = 0
    for line in stderr.splitlines():
        if "conversations in this batch" in line:
            skipped += int(line.split("Skipped ", 1)[1].split("/", 1)[0])
    return skipped


SAME_CORPUS = """
sys.path.insert(0, params["tests"])
from hostile_corpus import as_sharegpt, corpus
from speculators_qwen_compat.data.normalize import normalize_conversation, pick_conversation

def outcome(normalize, conv):
    try:
        return "kept: " + json.dumps(normalize(conv), sort_keys=True)
    except Exception as exc:
        return "dropped: " + str(exc)

out["pairs"] = {}
for kind, (row, _) in corpus(params["renders"]).items():
    for form, data in (("openai", row), ("sharegpt", as_sharegpt(row))):
        try:
            conv = pick_conversation(data)
        except Exception:
            continue  # no conversation at all: the row never reaches a normaliser
        out["pairs"][f"{kind}/{form}"] = [
            outcome(normalize_conversation, conv), outcome(P._normalize_conversation, conv)
        ]
"""


def test_patched_normaliser_agrees_with_the_package_on_the_hostile_corpus(
    patched: PatchedSource, units: dict[str, Any] | None
) -> None:
    """One corpus (tests/hostile_corpus.py, both formats) through both normalisers: the same
    turns kept (compared whole), or dropped for the same reason, on every row."""
    _src(patched)
    assert units is not None
    out = units
    assert len(out["pairs"]) >= 60
    diverging = {key: pair for key, pair in out["pairs"].items() if pair[0] != pair[1]}
    assert not diverging, json.dumps(diverging, indent=1)
