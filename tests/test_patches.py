"""The source patches in patches/<release>/, against the installed release's own source.

The release is laid out as the upstream repository has it (tools/release_source.py), from the
installed release's own files (.venvs/rel/<release>/site-packages/speculators hold the wheel's
files unchanged), so nothing is downloaded during the tests. Every patch must pass ``git apply
--check`` and apply, in order; the patched speculators then runs in a subprocess of this venv's
Python with our run-time hooks off (``SPECULATORS_QWEN_COMPAT=0``) and the patched ``src`` first
on ``PYTHONPATH``, so it shadows the installed release. Data preparation must keep every good
conversation with the right mask and leave out the rejected ones, in both formats, with two map
workers; the patches' normaliser and the package's must treat the hostile corpus alike; on 0.8+
the patched local renderer must answer vLLM's golden ids (tests/golden/). What runs inside the
patched source is tests/programs/patched_checks.py. The patches that carry the package's logic
must be what tools/make_patches.py makes of it.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import parity_corpus
import pytest
import vllm_server
from conftest import (
    RELEASE,
    RENDERS,
    as_written,
    good_rows,
    rejected_rows,
    run_program,
    write_dataset,
)
from format_corpus import Format, Skip, formats, write_format
from hostile_corpus import corpus
from mask_oracle import check_masks, load_rows
from packaging.version import Version
from programs.patched_checks import RUN_MARK
from qwen_vocab import vocab_dir
from test_data_formats import TAG, _check_conversation, _supervised

from speculators_qwen_compat import demo
from speculators_qwen_compat.demo.sample_data import REJECTED_REASONS

ROOT = Path(__file__).resolve().parents[1]
SEQ_LENGTH = 512
#: A template that rejects every conversation, as a strict one rejects the mask probe's.
RAISING_TEMPLATE = "{{ raise_exception('No user query found in messages.') }}"
WITH_TOOLS = Version("0.7") <= RELEASE  # 0.7+ pass a row's tools column to the template
TRUNCATES = Version("0.9") <= RELEASE  # 0.9 sends truncate_prompt_tokens


def _tool(name: str) -> ModuleType:
    """A module of tools/ (not a package; its modules import each other by name)."""
    if str(ROOT / "tools") not in sys.path:
        sys.path.insert(0, str(ROOT / "tools"))
    return importlib.import_module(name)


release_source = _tool("release_source")
make_patches = _tool("make_patches")


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


def _run_patched(src: Path, checks: list[str], params: dict[str, Any], cwd: Path) -> dict[str, Any]:
    """programs/patched_checks.py's ``checks`` against the patched source, hooks off (one
    interpreter: their start-up is not what they test). ``-P``: the program's folder is not put
    first on ``sys.path``; the patched ``src`` is."""
    request = cwd / "request.json"
    request.write_text(json.dumps({"checks": checks, "params": params}), "utf-8")
    path = os.pathsep.join((str(src), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")))
    result = run_program(
        "patched_checks", str(request), flags=("-P",), cwd=cwd,
        SPECULATORS_QWEN_COMPAT="0", PYTHONPATH=path.rstrip(os.pathsep),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    identity = out["identity"]
    assert Path(identity["speculators"]).is_relative_to(src), identity["speculators"]
    assert not identity["hooks"], "speculators_qwen_compat's run-time hooks were on"
    assert identity["patched"], "preprocessing lacks the patches' conversation_rules"
    out["stderr"] = result.stderr
    return out


def test_release_has_the_patches_it_needs() -> None:
    patches = release_source.release_patches(str(RELEASE))
    assert patches, f"no patches for the installed speculators {RELEASE} in patches/{RELEASE}/"
    names = {patch.stem.partition("-")[2] for patch in patches}
    assert needed_fixes(RELEASE) <= names, f"missing: {needed_fixes(RELEASE) - names}"
    numbers = [patch.name[:4] for patch in patches]
    assert numbers == [f"{n:04d}" for n in range(1, len(patches) + 1)]


def test_patches_apply_in_order(patched: PatchedSource) -> None:
    assert patched.problem is None, patched.problem


def test_committed_patches_are_what_make_patches_makes(patched: PatchedSource) -> None:
    """The patches that carry the package's logic (normalize-turns, local-render) are generated
    from it (tools/make_patches.py); a committed one that differs is stale."""
    import speculators

    installed = Path(speculators.__file__).parent
    assert make_patches.stale(str(RELEASE), installed) == [], "run: make patches"


def test_the_local_render_hook_renders_nothing_itself(patched: PatchedSource) -> None:
    """0.8+: the hand-written render_locally only loads the processor, refuses non-text parts
    and hands the request to render_rules.request_ids (generated from data/render/render.py): no
    template, tokenizer or truncation logic of its own that could drift from the package."""
    source = _src(patched) / "speculators/data_generation/render_client.py"
    tree = ast.parse(source.read_text("utf-8"))
    (function,) = [n for n in tree.body if getattr(n, "name", None) == "render_locally"]
    called = {ast.unparse(node.func) for node in ast.walk(function) if isinstance(node, ast.Call)}
    assert "render_rules.request_ids" in called, called
    assert not {c for c in called if c.rsplit(".", 1)[-1] in _RENDERING}, called


#: what rendering calls: a hook calling any of them renders with logic of its own
_RENDERING = {"apply_chat_template", "encode", "template_messages", "template_tools"}


if not RENDERS:
    del test_the_local_render_hook_renders_nothing_itself


@pytest.fixture(scope="module")
def units(
    patched: PatchedSource, qwen36_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any] | None:
    """The unit checks, the hostile corpus through both normalisers and (0.8+) the vLLM parity
    corpus through the patched local renderer, in one interpreter of the patched source (None
    when the patches did not apply: the tests then fail with the reason)."""
    if patched.problem:
        return None
    work = tmp_path_factory.mktemp("units")
    raising = demo.write_model(work / "raising", template=RAISING_TEMPLATE)
    params: dict[str, Any] = {
        "model": str(qwen36_dir),
        "raising": str(raising),
        "renders": RENDERS,
        "truncates": TRUNCATES,
    }
    checks = ["units", "same_corpus"]
    if RENDERS:
        checks.append("golden")
        params["models"] = {
            style: str(
                vllm_server.model_folder(work / style, demo.chat_template(style), vocab_dir())
            )
            for style in parity_corpus.STYLES
        }
    return _run_patched(patched.src, checks, params, cwd=work)


def test_probe_normalizer_and_local_render(
    patched: PatchedSource, units: dict[str, Any] | None
) -> None:
    _src(patched)
    assert units is not None
    out = units["units"]

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
    assert rejected["not a mapping"] == "BadConversation: turn is not a mapping (str)"
    assert rejected["bad arguments"].endswith("tool call arguments are not valid JSON")
    assert "narrator" in units["stderr"]  # the unknown role is logged

    if RENDERS:
        renders = out["renders"]
        for name in ("plain", "parts"):
            assert renders[name]["local"] == renders[name]["want"], name
        # the Qwen templates loop over content (their render_content macro): vLLM hands them
        # the parts as a list, and they join them without a newline
        assert "First part.Second part." in renders["parts"]["text"]
    if TRUNCATES:
        want = out["renders"]["plain"]["want"]
        assert out["renders"]["left"] == want[-5:]
        assert out["renders"]["right"] == want[:5]
        assert out["renders"]["unset"] == want[:5]  # not the tokenizer's left


@pytest.mark.parametrize("style", parity_corpus.STYLES)
def test_patched_local_render_gives_vllm_golden_ids(
    patched: PatchedSource, units: dict[str, Any] | None, style: str
) -> None:  # collected on 0.8+ only (below): <= 0.7 render in-process, with no vLLM to match
    """0.8+: every case of the vLLM parity corpus (tests/parity_corpus.py) through the patched
    ``render_conversation("local:...")`` gives the ids vLLM 0.32's render endpoint gave
    (tests/golden/), or fails where the server answered 400. On 0.8, which sends no truncation
    fields, the cases that ask for truncation are left out (0.9 runs them)."""
    _src(patched)
    assert units is not None
    expected = parity_corpus.load_golden(style, vllm_server.VLLM_VERSION)
    if not TRUNCATES:
        cases = parity_corpus.cases()
        expected = {k: v for k, v in expected.items() if "truncate_prompt_tokens" not in cases[k]}
    got = {name: answer for name, answer in units["golden"][style].items() if name in expected}
    assert parity_corpus.mismatches(got, expected) == []


if not RENDERS:
    del test_patched_local_render_gives_vllm_golden_ids


def _prepare_kwargs(model: Path, folder: Path, files: list[Path], proc: int) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "target_model_path": str(model),
        "train_data_paths": [str(f) for f in files],
        "seq_length": SEQ_LENGTH,
        "build_dataset_num_proc": proc,
        "token_freq_path": str(folder / "token_freq.pt"),
    }
    if RENDERS:
        kwargs["render_endpoint"] = "local"
    return kwargs


def _types(value: Any, path: str, out: dict[str, set[str]]) -> dict[str, set[str]]:
    """JSON type per path (list items share their list's path); nulls fit any type."""
    if isinstance(value, dict):
        out.setdefault(path, set()).add("object")
        for key, item in value.items():
            _types(item, f"{path}.{key}", out)
    elif isinstance(value, list):
        out.setdefault(path, set()).add("list")
        for item in value:
            _types(item, f"{path}[]", out)
    elif value is not None:
        out.setdefault(path, set()).add(type(value).__name__)
    return out


def arrow_files(folder: Path, rows: list[dict[str, Any]]) -> list[Path]:
    """The rows in as few JSON-lines files as upstream's loader (``datasets``' JSON builder, one
    Arrow schema per file) reads: a row goes to the first file whose rows give no path of it
    another type. The package reads each row on its own; upstream cannot (README of patches/)."""
    groups: list[tuple[dict[str, set[str]], list[dict[str, Any]]]] = []
    for row in rows:
        types = _types(row, "", {})
        for known, members in groups:
            if all(known.get(path, kinds) == kinds for path, kinds in types.items()) and all(
                len(kinds) == 1 for kinds in types.values()
            ):
                for path, kinds in types.items():
                    known.setdefault(path, kinds)
                members.append(row)
                break
        else:
            groups.append((types, [row]))
    files = []
    for index, (_, members) in enumerate(groups):
        path = folder / f"part-{index:02d}.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in members))
        files.append(path)
    return files


@pytest.fixture(scope="module")
def prepared(
    patched: PatchedSource, qwen36_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any] | None:
    """Data preparation of the patched source, one run after the other in one interpreter: both
    formats of the sample data with rejected rows mixed in, and the hostile corpus; per run its
    output folder, rows and its own stderr lines."""
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
        kwargs = _prepare_kwargs(qwen36_dir, folder, [data], proc=2)
        runs[name] = {"kwargs": kwargs, "output": str(folder / "out")}
    folder = work / "hostile"
    folder.mkdir()
    (work / "cat.png").write_bytes(b"")  # image_by_path's file, in the run's folder
    files = arrow_files(folder, [row for row, _ in corpus(RENDERS).values()])
    kwargs = _prepare_kwargs(qwen36_dir, folder, files, proc=1)
    runs["hostile"] = {"kwargs": kwargs, "output": str(folder / "out")}
    each = {}
    for fmt in formats(RENDERS):
        folder = work / "formats" / fmt.name
        folder.mkdir(parents=True)
        kwargs = _prepare_kwargs(qwen36_dir, folder, [write_format(folder, fmt)], proc=1)
        if Version("0.7") <= RELEASE:
            kwargs["allow_empty_output"] = True  # a format read as nothing is a difference
        each[fmt.name] = {"kwargs": kwargs, "output": str(folder / "out")}
    params = {"runs": runs, "each": each}
    out = _run_patched(patched.src, ["prepare", "prepare_each"], params, cwd=work)
    parts = out["stderr"].split(RUN_MARK)[1:]
    stderr = {part.split("\n", 1)[0]: part for part in parts}
    assert sorted(stderr) == sorted(runs), out["stderr"][-3000:]
    return {
        **{
            name: {
                "rows": out["prepare"][name], "stderr": stderr[name], "output": Path(run["output"]),
                "good": good, "rejected": rejected, "all": rows,
            }
            for name, run in runs.items()
        },
        "formats": {
            name: (out["prepare_each"][name], Path(run["output"])) for name, run in each.items()
        },
    }  # fmt: skip


#: Where the patched upstream treats hostile rows unlike the package, and why (README of
#: patches/, "Compared with the run-time package"); every other row must come out as the
#: package's. Rows the package keeps that the patches skip:
HOSTILE_SKIPPED: dict[str, str] = {}
#: Rows the package skips with a reason that the patched upstream keeps with a supervised row:
#: <= 0.7 on a tokenizer, image rows (one pad per image, no pixels;
#: data/normalize/processor_media.py is not patched).
HOSTILE_KEPT_BY_PATCHES: dict[str, str] = (
    {} if RENDERS else {"image_by_path": "the package skips image rows a tokenizer would render"}
)
#: Rows the package skips ("nothing to supervise") that the patched upstream keeps as rows with
#: no supervised token: <= 0.7 keep such rows, 0.8+ make no row of them either.
HOSTILE_UNSUPERVISED: tuple[str, ...] = (
    () if RENDERS else ("user_only", "vendor_role", "far_beyond_seq_length")
)


def test_hostile_corpus_rows_as_the_package(
    patched: PatchedSource, prepared: dict[str, Any] | None, qwen36_dir: Path
) -> None:
    """The hostile corpus (tests/hostile_corpus.py, OpenAI form) through the patched upstream:
    every row the package keeps is kept with the mask the oracle computes and no other row has a
    supervised token, but for the differences named above."""
    _src(patched)
    assert prepared is not None
    out = prepared["hostile"]
    cases = corpus(RENDERS)
    assert set(HOSTILE_SKIPPED) | set(HOSTILE_UNSUPERVISED) <= set(cases)
    assert all(cases[kind][1] is not None for kind in HOSTILE_UNSUPERVISED)
    assert all(cases[kind][1] is not None for kind in HOSTILE_KEPT_BY_PATCHES)
    kept = [
        row
        for kind, (row, reason) in cases.items()
        if (reason is None and kind not in HOSTILE_SKIPPED) or kind in HOSTILE_KEPT_BY_PATCHES
    ]
    rows = load_rows(out["output"])
    supervised = [row for row in rows if any(row["loss_mask"])]
    unsupervised = [row["input_ids"] for row in rows if not any(row["loss_mask"])]
    which = _hostile_kinds(qwen36_dir, unsupervised, cases)
    assert sorted(which) == sorted(HOSTILE_UNSUPERVISED), out["stderr"][-3000:]
    # the supervised rows are matched one to one with the conversations kept (mask_oracle)
    expected = check_masks(qwen36_dir, supervised, kept, RENDERS, with_tools=WITH_TOOLS)
    assert len(supervised) == expected, out["stderr"][-3000:]


def _hostile_kinds(model: Path, rows: list[list[int]], cases: dict[str, Any]) -> list[str]:
    """Which hostile conversation each row (its ids) is: the kind whose turns in the table's
    roles (<= 0.7 leave other roles out), applied to the chat template by transformers and cut
    to SEQ_LENGTH, give exactly the row's ids ("?" for a row that is none of them)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model))
    table = {"system", "user", "assistant", "tool"}
    expected: dict[tuple[int, ...], list[str]] = {}
    for kind, (row, _) in cases.items():
        turns = row.get("messages")
        if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
            continue
        kept = [t for t in turns if t.get("role") in table]
        try:
            text = tokenizer.apply_chat_template(kept, tokenize=False)
        except Exception:  # a conversation transformers cannot take as written: not a candidate
            continue
        ids = tokenizer.encode(text, add_special_tokens=False)[:SEQ_LENGTH]
        expected.setdefault(tuple(ids), []).append(kind)
    return ["/".join(expected.get(tuple(ids), ["?"])) for ids in rows]


def format_differences(release: Version) -> dict[str, str]:
    """Formats (tests/format_corpus.py) the patched upstream reads unlike the package, and why:
    the table "Formats read unlike the package" of patches/README.md, for ``release`` (a row's
    releases: ``every`` or ``X+``). Every other format must come out as the package's, row for
    row; the list must be exact: a format that stops differing fails the test too."""
    text = (ROOT / "patches" / "README.md").read_text("utf-8")
    section = text.split("### Formats read unlike the package", 1)[1].split("\n## ", 1)[0]
    out = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        name, releases, why = cells[0].strip("`"), cells[1], cells[2]
        if releases == "every" or Version(releases.rstrip("+")) <= release:
            out[name] = why
    return out


FORMAT_DIFFERENCES = format_differences(RELEASE)


def _format_problems(fmt: Format, result: int | str, output: Path, tokenizer: Any) -> list[str]:
    """What the patched upstream did to one format's rows unlike the package (format_corpus's
    hand-written oracle, checked as tests/test_data_formats.py checks the package)."""
    if isinstance(result, str):
        return [f"{fmt.name}: {result}"]
    by_tag: dict[int, list[tuple[str, str]]] = {}
    for row in load_rows(output) if result else []:
        full = tokenizer.decode(row["input_ids"], skip_special_tokens=False)
        found = TAG.search(full)
        key = int(found.group(2)) if found and found.group(1) == fmt.name else -1
        by_tag.setdefault(key, []).append((full, _supervised(tokenizer, row)))
    wrong = []
    for k, expect in enumerate(fmt.expect):
        rows = by_tag.pop(k, [])
        if isinstance(expect, Skip):
            wrong += [f"{fmt.name}:{k} kept, the package skips it"] if rows else []
        else:
            wrong += _check_conversation(f"{fmt.name}:{k}", expect, rows)
    return wrong + [f"{fmt.name}: rows of no conversation {sorted(by_tag)}"] * bool(by_tag)


def test_formats_corpus_as_the_package(
    patched: PatchedSource, prepared: dict[str, Any] | None, qwen36_dir: Path
) -> None:
    """Each format of tests/format_corpus.py through the patched upstream on its own: its rows
    kept with exactly the expected text supervised, or skipped, as the package does, but for the
    formats named in ``FORMAT_DIFFERENCES``."""
    from transformers import AutoTokenizer

    _src(patched)
    assert prepared is not None
    tokenizer = AutoTokenizer.from_pretrained(str(qwen36_dir))
    differing = {}
    for fmt in formats(RENDERS):
        problems = _format_problems(fmt, *prepared["formats"][fmt.name], tokenizer)
        if problems:
            differing[fmt.name] = problems
    unnamed = {k: v[:2] for k, v in differing.items() if k not in FORMAT_DIFFERENCES}
    assert not unnamed, json.dumps(unnamed, indent=1)[:4000]
    assert set(differing) == set(FORMAT_DIFFERENCES), "formats no longer differing: " + str(
        sorted(set(FORMAT_DIFFERENCES) - set(differing))
    )


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


def test_patched_normaliser_agrees_with_the_package_on_the_hostile_corpus(
    patched: PatchedSource, units: dict[str, Any] | None
) -> None:
    """One corpus (tests/hostile_corpus.py, both formats) through both normalisers: the same
    turns kept (compared whole, as structures), or the same rejection (its type, that it is a
    data problem, its reason) on every row; any other exception fails the check."""
    _src(patched)
    assert units is not None
    pairs = units["same_corpus"]
    assert len(pairs) >= 60
    diverging = {key: pair for key, pair in pairs.items() if pair[0] != pair[1]}
    assert not diverging, json.dumps(diverging, indent=1)
    # the corpus exercises both outcomes, and every rejection is a data problem
    dropped = [pair[0]["dropped"] for pair in pairs.values() if "dropped" in pair[0]]
    assert dropped and len(dropped) < len(pairs)
    assert all(d["data_problem"] and d["type"] == "BadConversation" for d in dropped), dropped
