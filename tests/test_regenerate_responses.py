"""``regenerate-responses`` against a real vLLM 0.32 generating on CPU (issue 29).

One ``vllm serve`` of a tiny Qwen3.5 hybrid (tests/tiny_checkpoints.py, the demo's Qwen3.6-style
template) with the reasoning and tool-call parsers a Qwen3.6 deployment uses, for the module;
regen_proxy.py picks each request's structured-outputs regex so the random model thinks and
then answers or calls a tool. Each 0.8+ release runs in its own environment
(tools/release_python.sh), so the matrix's one ``vllm`` pass covers 0.8.1 and 0.9.0.

The oracle is regen_data.py: what each conversation must become, and the cached results
and reasoning the rows' own decoded text (upstream's ``text`` twin) must show. The same data
through upstream as shipped (fixes off) shows what the fixes change.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import regen_data
import tiny_checkpoints
import vllm_server
from conftest import FIXES_OFF, release_command
from packaging.version import Version
from regen_proxy import Proxy
from regen_stand_in import wait_for_rows

from speculators_qwen_compat.core.releases import TESTED_RELEASES

pytestmark = pytest.mark.vllm
RELEASES = [r for r in TESTED_RELEASES if Version("0.8") <= Version(r)]
#: The fault tests below (a killed server, a 504, two writers, a hard kill) run on the newest
#: release only: what they test is ours (speculators_qwen_compat/regenerate/), the same on every
#: release, and each 0.8+ suite drives the same faults through that release's own ``_run`` and
#: ``_worker`` (tests/test_regen_loop.py). Each costs a minute or more of a 2-core CI; the
#: tests above, which read what the release itself writes, run on every 0.8+ release.
FAULT_RELEASES = RELEASES[-1:]
ENTRY = ("-m", "speculators_qwen_compat.regenerate_responses")
UPSTREAM = ("-m", "speculators", "regenerate-responses")
ERROR = "speculators_qwen_compat: error: "


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-qwen35")
    return tiny_checkpoints.write_checkpoint(
        folder, "qwen35_text", sizes=tiny_checkpoints.VLLM, bf16=True
    )


@pytest.fixture(scope="module")
def server(target: Path) -> Any:
    with vllm_server.serve_generation(target) as running:
        yield running


@pytest.fixture(scope="module")
def proxy(server: Any) -> Any:
    forward = Proxy(server.url)
    yield forward
    forward.close()


def regen_command(
    release: str, endpoint: str, model: Path, *args: str, upstream: bool = False,
    data: str = "data.jsonl", out: str = "out.jsonl", concurrency: int = 2,
) -> tuple[list[str], dict[str, str]]:  # fmt: skip
    """(command, environment) of one regenerate-responses run of ``release``."""
    return release_command(
        release, *(UPSTREAM if upstream else ENTRY), "--endpoint",
        endpoint + "/v1/chat/completions", "--model", str(model), "--dataset", data,
        "--outfile", out, "--max-tokens", str(regen_data.MAX_TOKENS),
        "--concurrency", str(concurrency), *args, **(FIXES_OFF if upstream else {}),
    )  # fmt: skip


def regen(release: str, cwd: Path, endpoint: str, model: Path, *args: str,
          **options: Any) -> subprocess.CompletedProcess:  # fmt: skip
    command, env = regen_command(release, endpoint, model, *args, **options)
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env, timeout=900)


def rows_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module", params=RELEASES)
def first_run(request: pytest.FixtureRequest, proxy: Any, target: Path, tmp_path_factory: Any):
    release = request.param
    work = tmp_path_factory.mktemp(f"regen-{release}")
    regen_data.write(work / "data.jsonl")
    ran = regen(release, work, proxy.url, target)
    return release, work, ran


def test_every_conversation_regenerated_or_counted(first_run: Any) -> None:
    _, work, ran = first_run
    assert ran.returncode == 0, ran.stderr[-3000:]
    rows = rows_of(work / "out.jsonl")
    per_id = Counter(row["primary_id"] for row in rows)
    report = json.loads((work / "out.jsonl.report.json").read_text())
    failed_ids = {json.loads(line)["id"] for line in (work / "out.errors.jsonl").open()}
    for conv, expected in regen_data.EXPECTED.items():
        outcome = expected[0]
        if outcome in ("regenerated", "cut"):
            assert per_id[conv] == expected[-1], (conv, per_id[conv])
        else:
            assert conv not in per_id, conv
        if outcome == "cut":
            assert any(expected[1] in reason for reason in report["cut_short"]), (conv, report)
        if outcome in ("skipped", "failed"):
            counted = report["skipped" if outcome == "skipped" else "failed"]
            assert any(expected[1] in reason for reason in counted), (conv, report)
        assert (conv in failed_ids) == (outcome == "failed"), conv
    want = Counter(e[0] for e in regen_data.EXPECTED.values())
    assert report["regenerated"] == want["regenerated"]
    assert sum(report["cut_short"].values()) == want["cut"]
    assert sum(report["skipped"].values()) == want["skipped"]
    assert sum(report["failed"].values()) == want["failed"]
    assert report["conversations_in"] == len(regen_data.EXPECTED) == sum(want.values())
    assert report["rows_out"] == len(rows) and report["complete"] is True
    assert report["warnings"] == {"conversations whose first prompt alone reaches --max-tokens": 1}
    last = ran.stdout.strip().splitlines()[-1]
    assert last.startswith(
        f"regenerated {want['regenerated']} of {len(regen_data.EXPECTED)} conversations "
        f"({len(rows)} rows); cut short {want['cut']}: "
    ), last
    assert last.endswith("; wrote out.jsonl"), last
    assert not (work / "out.partial.jsonl").exists()


def _texts(work: Path, name: str = "out.jsonl") -> dict[str, str]:
    return {row["id"]: row["text"] for row in rows_of(work / name)}


def _reasoning(text: str) -> str:
    """The reasoning of a row's own reply (its last think block)."""
    return text.rsplit("<think>\n", 1)[1].split("\n</think>", 1)[0]


def test_tool_results_answer_their_call_and_reasoning_stays(first_run: Any) -> None:
    _, work, ran = first_run
    assert ran.returncode == 0, ran.stderr[-3000:]
    texts = _texts(work)
    weather = "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
    for conv in ("agentic", "llamafactory"):
        step = texts[f"{conv}_gen1"]
        assert (
            f"{weather}</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n"
            f"{regen_data.WEATHER_RESULT}\n</tool_response>"
        ) in step
        # the first reply's reasoning is in the second prompt where the template keeps it
        first = _reasoning(texts[f"{conv}_gen0"])
        assert f"<think>\n{first.strip()}\n</think>\n\n<tool_call>" in step
    assert all(regen_data.SEARCH_RESULT not in text for text in texts.values())
    early = texts["leading-result_gen0"]
    assert early.index(regen_data.EARLY_RESULT) < early.index("weather? [call get_weather]")
    assert "answer in French" in texts["developer_gen0"]


def test_upstream_as_shipped_loses_them(first_run: Any, proxy: Any, target: Path) -> None:
    """The pins: the same data through upstream, fixes off."""
    release, work, _ = first_run
    ran = regen(release, work, proxy.url, target, upstream=True, out="upstream.jsonl")
    assert ran.returncode == 0  # whatever happened
    texts = _texts(work, "upstream.jsonl")
    assert any(regen_data.SEARCH_RESULT in text for text in texts.values())  # spliced by position
    assert "answer in French" not in texts["developer_gen0"]  # developer turn dropped
    errors = {json.loads(line)["id"] for line in (work / "upstream.errors.jsonl").open()}
    assert {"late-system", "long-second", "long-first"} <= errors  # finished turns lost
    ids = {text_id.rsplit("_gen", 1)[0] for text_id in texts}
    assert not ids & {"no-user", "empty", "no-role"}
    assert "skipped" not in ran.stdout  # ... and not counted anywhere


def test_rerun_is_refused_and_resume_adds_nothing_twice(
    first_run: Any, proxy: Any, target: Path
) -> None:
    release, work, _ = first_run
    before = (work / "out.jsonl").read_bytes()
    again = regen(release, work, proxy.url, target)
    assert again.returncode == 1
    assert again.stderr.strip().splitlines()[-1].startswith(f"{ERROR}out.jsonl already exists")
    assert (work / "out.jsonl").read_bytes() == before
    resumed = regen(release, work, proxy.url, target, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert (work / "out.jsonl").read_bytes() == before  # nothing added: not even rewritten
    done = sum(1 for e in regen_data.EXPECTED.values() if e[0] in ("regenerated", "cut"))
    last = resumed.stdout.splitlines()[-1]
    assert f"; {done} already in the output (--resume)" in last
    assert last.endswith("; nothing new: out.jsonl is as it was"), last


def test_prepare_data_takes_the_output(first_run: Any, target: Path) -> None:
    release, work, ran = first_run
    assert ran.returncode == 0
    command, env = release_command(
        release, "-m", "speculators_qwen_compat.prepare_data", "--model", str(target),
        "--data", "out.jsonl", "--output", "prepared", "--seq-length", "2048",
        "--num-preprocessing-workers", "1",
    )  # fmt: skip
    prepared = subprocess.run(command, cwd=work, capture_output=True, text=True, env=env)
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    from datasets import load_from_disk

    dataset = load_from_disk(str(work / "prepared"))
    written = {row["id"]: row for row in rows_of(work / "out.jsonl")}
    assert len(dataset) == len(written)
    for row in dataset:
        source = next(r for r in written.values() if r["input_ids"] == list(row["input_ids"]))
        assert list(row["loss_mask"]) == source["loss_mask"]


def test_dead_server_fails_the_run_at_once(tmp_path: Path, target: Path) -> None:
    regen_data.write(tmp_path / "data.jsonl")
    closed = f"http://127.0.0.1:{vllm_server.free_port()}"
    started = time.monotonic()
    ran = regen(RELEASES[-1], tmp_path, closed, target, "--max-retries", "0")
    assert ran.returncode == 1
    line = ran.stderr.strip().splitlines()[-1]
    assert line.startswith(f"{ERROR}the vLLM server at {closed}"), line
    assert "no row was written" in line and "rerun the same command" in line
    assert time.monotonic() - started < 120
    assert not any(p.name.startswith("out") and p.suffix == ".jsonl" for p in tmp_path.iterdir())


@pytest.mark.parametrize("release", FAULT_RELEASES)
def test_server_killed_mid_run_then_resumed(
    release: str, server: Any, proxy: Any, target: Path, tmp_path: Path
) -> None:
    """The server dies while conversations are in flight: the run fails within minutes with one
    line naming the partial output; after a restart ``--resume`` finishes it, nothing twice."""
    many = [
        {"id": f"chat-{i}", "messages": [
            {"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": "a"},
            {"role": "user", "content": f"follow-up {i}"},
        ]}
        for i in range(60)
    ]  # fmt: skip
    (tmp_path / "many.jsonl").write_text("".join(json.dumps(r) + "\n" for r in many))
    command, env = regen_command(
        release, proxy.url, target, "--max-retries", "1", data="many.jsonl", concurrency=1
    )
    run = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)  # fmt: skip
    partial = tmp_path / "out.partial.jsonl"
    wait_for_rows(run, partial, 4)
    assert run.poll() is None, "the run ended before the server was killed"
    killed = time.monotonic()
    assert server.process is not None
    server.process.send_signal(signal.SIGKILL)  # the API server; its engine follows
    server.halt()
    try:
        _, stderr = run.communicate(timeout=300)
    finally:
        run.kill()
    assert time.monotonic() - killed < 180
    assert run.returncode == 1, stderr[-3000:]
    line = stderr.strip().splitlines()[-1]
    assert re.match(rf"{re.escape(ERROR)}the vLLM server at .* failed: ", line), line
    assert "out.partial.jsonl (partial)" in line and "--resume" in line, line
    assert not (tmp_path / "out.jsonl").exists()
    assert not (tmp_path / "out.partial.errors.jsonl").read_text()  # no fault counted as data
    report = json.loads((tmp_path / "out.jsonl.report.json").read_text())
    assert report["complete"] is False and not report["failed"]
    done_before = Counter(row["primary_id"] for row in rows_of(partial))
    assert done_before and set(done_before.values()) == {2}

    server.restart()
    resumed = subprocess.run([*command, "--resume"], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=900)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    per_id = Counter(row["primary_id"] for row in rows_of(tmp_path / "out.jsonl"))
    assert per_id == {row["id"]: 2 for row in many}
    assert f"{len(done_before)} already in the output (--resume)" in resumed.stdout


# --- issue 33: the outside world (a gateway's 504, a request never answered, two writers, a
# hard kill, a resume over other data) ---


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _chats(prefix: str, count: int) -> list[dict[str, Any]]:
    return [{"id": f"{prefix}-{i}", "messages": [{"role": "user", "content": f"q {prefix} {i}"}]}
            for i in range(count)]  # fmt: skip


GATEWAY = "HTTP 504 after every retry"
NEVER = "no answer within --request-timeout 5 s, after every retry"
FAULT_FLAGS = ("--request-timeout", "5", "--max-retries", "1")


@pytest.mark.parametrize("release", FAULT_RELEASES)
def test_one_bad_request_is_counted_and_resume_over_other_data_keeps_the_output(
    release: str, proxy: Any, target: Path, tmp_path: Path
) -> None:
    faulty = [
        *_chats("ok", 3),
        {"id": "gateway", "messages": [{"role": "user", "content": "slow [504]"}]},
        {"id": "never", "messages": [{"role": "user", "content": "stuck [hang]"}]},
    ]
    _write(tmp_path / "faulty.jsonl", faulty)
    ran = regen(release, tmp_path, proxy.url, target, *FAULT_FLAGS, data="faulty.jsonl")
    assert ran.returncode == 0, ran.stderr[-3000:]
    per_id = Counter(row["primary_id"] for row in rows_of(tmp_path / "out.jsonl"))
    assert per_id == {f"ok-{i}": 1 for i in range(3)}
    report = json.loads((tmp_path / "out.jsonl.report.json").read_text())
    assert report["failed"] == {GATEWAY: 1, NEVER: 1}
    assert report["conversations_in"] == 5 and report["exit_code"] == 0
    errors = {json.loads(line)["id"] for line in (tmp_path / "out.errors.jsonl").open()}
    assert errors == {"gateway", "never"}
    last = ran.stdout.strip().splitlines()[-1]
    assert last.startswith("regenerated 3 of 5 conversations (3 rows)"), last
    assert f'failed 2: 1 x "{GATEWAY}", 1 x "{NEVER}"' in last, last

    before = (tmp_path / "out.jsonl").read_bytes()
    other = [
        {"id": "other-504", "messages": [{"role": "user", "content": "again [504]"}]},
        {"id": "other-no-user", "messages": [{"role": "assistant", "content": "hi"}]},
    ]
    _write(tmp_path / "other.jsonl", other)
    resumed = regen(release, tmp_path, proxy.url, target, *FAULT_FLAGS, "--resume",
                    data="other.jsonl")  # fmt: skip
    assert resumed.returncode == 1
    assert (tmp_path / "out.jsonl").read_bytes() == before
    assert not (tmp_path / "out.partial.jsonl").exists()
    line = resumed.stderr.strip().splitlines()[-1]
    assert line.startswith(f"{ERROR}nothing new was regenerated (regenerated 0 of 2"), line
    assert "the earlier rows in out.jsonl are as they were" in line, line
    report = json.loads((tmp_path / "out.jsonl.report.json").read_text())
    assert report["exit_code"] == 1 and report["output"] == "out.jsonl"
    assert report["failed"] == {GATEWAY: 1} and report["skipped"] == {"no user turn": 1}


@pytest.mark.parametrize("release", FAULT_RELEASES)
def test_two_runs_at_once_one_is_refused(
    release: str, proxy: Any, target: Path, tmp_path: Path
) -> None:
    chats = _chats("two", 6)
    _write(tmp_path / "data.jsonl", chats)
    command, env = regen_command(release, proxy.url, target, "--resume", concurrency=1)
    with proxy.hold():  # the first run's requests wait: it is mid-run, holding its lock
        first = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)  # fmt: skip
        assert proxy.held.wait(300), "the first run sent no request"
        second = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                                timeout=900)  # fmt: skip
    _, first_err = first.communicate(timeout=900)
    assert first.returncode == 0, first_err[-3000:]
    assert second.returncode == 1, second.stderr[-3000:]
    refused = second.stderr.strip().splitlines()[-1]
    assert refused.startswith(f"{ERROR}another regenerate-responses run is writing"), refused
    per_id = Counter(row["primary_id"] for row in rows_of(tmp_path / "out.jsonl"))
    assert per_id == {row["id"]: 1 for row in chats}


@pytest.mark.parametrize("release", FAULT_RELEASES)
def test_sigkill_then_resume_drops_the_torn_line_and_keeps_the_rows(
    release: str, proxy: Any, target: Path, tmp_path: Path
) -> None:
    chats = _chats("kill", 10)
    _write(tmp_path / "data.jsonl", chats)
    command, env = regen_command(release, proxy.url, target, concurrency=1)
    run = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)  # fmt: skip
    partial = tmp_path / "out.partial.jsonl"
    wait_for_rows(run, partial, 2)
    assert run.poll() is None, "the run ended before it was killed"
    run.send_signal(signal.SIGKILL)
    run.wait()
    torn = b'{"id": "kill-9_gen0", "primary_id": "kill-9", "input_ids": [1, 2'
    with partial.open("ab") as file:  # what a kill in the middle of a write leaves
        file.write(torn)
    earlier = partial.read_bytes()[: -len(torn)]
    resumed = subprocess.run([*command, "--resume"], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=900)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    out = (tmp_path / "out.jsonl").read_bytes()
    assert out.startswith(earlier)  # the earlier rows are not rewritten
    per_id = Counter(row["primary_id"] for row in rows_of(tmp_path / "out.jsonl"))
    assert per_id == {row["id"]: 1 for row in chats}
    assert (tmp_path / "out.torn.jsonl").read_bytes() == torn + b"\n"
    report = json.loads((tmp_path / "out.jsonl.report.json").read_text())
    assert report["torn_rows"] == 1 and report["conversations_in"] == len(chats)
    assert report["regenerated"] + report["already_done"] == len(chats)
    assert "rows of a torn last write set aside from the earlier output" in resumed.stdout
