"""regenerate-responses on the rest of a bad day (issue 45), end to end: our entry point on this
release's upstream command, in a subprocess as a user runs it, against the stand-in server
(tests/regen_stand_in.py: each prompt rendered by the model's own template, vLLM's answers and
refusals). The oracles are the bytes on disk, the server's log, the file's own hash and the
exit code, never the code under test.

- what a run used is in its report; ``--resume`` refuses changed generation settings in one
  line naming each, unless ``--allow-changed-settings`` (then the report keeps both);
- a full disk (a small tmpfs: the suite runs as root) ends every time as the documented line,
  with a report, no traceback, no record of the disk in the errors file and no torn line;
  ``--resume`` with room finishes, each conversation once;
- refusals that differ only in their numbers are one reason; past six reasons "and N more";
- ``--endpoint`` as ``.../v1`` and as the bare host; another path's 404 names the route;
- a line the loader cannot read is that row's counted skip, the other rows run;
- Ctrl-C writes the report.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXES_OFF, RENDERS, subprocess_env
from interruptible import interruptible, send_ctrl_c
from regen_stand_in import StandIn, chat, tool_chat, wait_for_rows

from speculators_qwen_compat import demo
from speculators_qwen_compat.data.read.unreadable import INVALID_UNICODE, MALFORMED_LINE, NOT_UTF8
from speculators_qwen_compat.regenerate.tally import RegenTally

pytestmark = pytest.mark.skipif(not RENDERS, reason="regenerate-responses is 0.8+")
ERROR = "speculators_qwen_compat: error: "
CONTEXT = 400


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo.write_model(tmp_path_factory.mktemp("model"), "qwen36")


@pytest.fixture(scope="module")
def server(model: Path) -> Iterator[StandIn]:
    served = StandIn(model, max_input_tokens=CONTEXT)
    yield served
    served.close()


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def command(server: StandIn, model: Path, data: Path, *extra: str,
            endpoint: str | None = None, max_tokens: str = "4096") -> list[str]:  # fmt: skip
    return [
        sys.executable, "-m", "speculators_qwen_compat.regenerate_responses",
        "--endpoint", endpoint or server.url + "/v1/chat/completions", "--model", str(model),
        "--dataset", str(data), "--outfile", "out.jsonl", "--max-tokens", max_tokens,
        "--concurrency", "4", "--max-retries", "1", *extra,
    ]  # fmt: skip


def regen(server: StandIn, model: Path, work: Path, data: Path, *extra: str,
          **kw: Any) -> subprocess.CompletedProcess:  # fmt: skip
    return subprocess.run(
        command(server, model, data, *extra, **kw),
        cwd=work, capture_output=True, text=True, env=subprocess_env(), timeout=600,
    )  # fmt: skip


def report(work: Path) -> dict[str, Any]:
    return json.loads((work / "out.jsonl.report.json").read_text(encoding="utf-8"))


def conversations(path: Path) -> Counter[str]:
    """Rows per conversation in a rows file (every line must be a whole row)."""
    data = path.read_bytes()
    assert not data or data.endswith(b"\n"), "a torn last line"
    return Counter(json.loads(line)["primary_id"] for line in data.splitlines())


def test_resume_refuses_changed_settings_unless_told_and_the_report_keeps_both(
    server: StandIn, model: Path, tmp_path: Path
) -> None:
    data = write(tmp_path / "data.jsonl", [chat(f"s{i}", f"q {i}") for i in range(3)])
    first = regen(server, model, tmp_path, data)
    assert first.returncode == 0, first.stderr[-2000:]
    recorded = report(tmp_path)["settings"]
    assert recorded["model"] == str(model) and recorded["max_tokens"] == 4096
    assert recorded["endpoint"] == server.url + "/v1/chat/completions"
    assert recorded["sampling_params"] == {}
    assert recorded["dataset_fingerprint"] == "sha256:" + hashlib.sha256(
        data.read_bytes()).hexdigest()  # fmt: skip
    assert recorded["releases"]["speculators"] == version("speculators")
    before = (tmp_path / "out.jsonl").read_bytes()
    write(data, [chat(f"s{i}", f"q {i}") for i in range(5)])  # the data grew
    for extra, flag, shown in (
        ({"max_tokens": "2048"}, "--max-tokens", "4096 then, 2048 now"),
        ({}, "--sampling-params", '{} then, {"top_p": 0.5} now'),
    ):
        args = ("--resume", "--sampling-params", '{"top_p": 0.5}') if not extra else ("--resume",)
        refused = regen(server, model, tmp_path, data, *args, **extra)
        lines = refused.stderr.strip().splitlines()
        assert refused.returncode == 1 and len(lines) == 1 and lines[0].startswith(ERROR)
        assert f"{flag} {shown}" in lines[0] and "--allow-changed-settings" in lines[0]
        assert (tmp_path / "out.jsonl").read_bytes() == before  # nothing was done
        assert not (tmp_path / "out.partial.jsonl").exists()
    went_on = regen(server, model, tmp_path, data, "--resume", "--allow-changed-settings",
                    max_tokens="2048")  # fmt: skip
    assert went_on.returncode == 0, went_on.stderr[-2000:]
    assert (tmp_path / "out.jsonl").read_bytes().startswith(before)
    assert set(conversations(tmp_path / "out.jsonl")) == {f"s{i}" for i in range(5)}
    now = report(tmp_path)
    assert now["settings"]["max_tokens"] == 2048 and now["settings_changed"] == ["--max-tokens"]
    assert [s["max_tokens"] for s in now["earlier_settings"]] == [4096]
    assert now["data_changed"]["now"]["dataset_fingerprint"] != recorded["dataset_fingerprint"]
    # the earlier run's report is kept beside it, never replaced
    assert json.loads((tmp_path / "out.jsonl.report.1.json").read_text())["settings"] == recorded


@contextmanager
def small_disk(folder: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` at ``folder`` (mount(8): the suite runs as root here; elsewhere
    this fails loudly rather than skip); unmounted afterwards."""
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                             capture_output=True, text=True)  # fmt: skip
    assert mounted.returncode == 0, f"this test mounts a tmpfs (as root): {mounted.stderr}"
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_full_disk_ends_as_the_documented_line_every_time_and_resume_finishes(
    server: StandIn, model: Path, tmp_path: Path
) -> None:
    # every fourth conversation refused (too long): its errors record goes to the same disk
    rows = [chat(f"t{i}", "word " * 2 * CONTEXT) if i % 4 == 3 else tool_chat(f"t{i}")
            for i in range(40)]  # fmt: skip
    data = write(tmp_path / "data.jsonl", rows)
    for attempt in range(2):
        with small_disk(tmp_path / f"disk{attempt}", "160k") as disk:
            ran = regen(server, model, disk, data, "--concurrency", "8")
            assert ran.returncode == 1 and "Traceback" not in ran.stderr, ran.stderr[-3000:]
            line = ran.stderr.strip().splitlines()[-1]
            assert line.startswith(f"{ERROR}cannot write out.partial.") and "No space" in line
            assert "--resume" in line and "not reached (run stopped)" in line
            written = conversations(disk / "out.partial.jsonl")
            assert all(n == 3 for n in written.values())  # whole conversations only
            counted = report(disk)
            assert counted["exit_code"] == 1 and counted["regenerated"] == len(written)
            assert counted["conversations_in"] == 40 and counted["not_reached"] > 0
            records = 0
            for errors in disk.glob("*errors*"):
                text = errors.read_bytes()
                assert not text or text.endswith(b"\n")  # no torn record
                assert b"No space" not in text and b"OSError(28" not in text
                records += len(text.splitlines())
            if "out.partial.jsonl:" in line:  # the rows' write failed, every record written
                assert records == sum(counted["failed"].values())
            subprocess.run(["mount", "-o", "remount,size=20m", str(disk)], check=True)
            resumed = regen(server, model, disk, data, "--resume", "--concurrency", "8")
            assert resumed.returncode == 0, resumed.stderr[-2000:]
            finished = conversations(disk / "out.jsonl")
            assert set(finished) == {f"t{i}" for i in range(40) if i % 4 != 3}
            assert set(finished.values()) == {3}  # each conversation once


def test_refusals_differing_in_their_numbers_are_one_reason(
    server: StandIn, model: Path, tmp_path: Path
) -> None:
    long = [chat(f"l{i}", "word " * (CONTEXT + 40 * i)) for i in range(7)]
    data = write(tmp_path / "data.jsonl", [chat("ok", "hello"), *long])
    ran = regen(server, model, tmp_path, data, "--max-consecutive-failures", "0")
    assert ran.returncode == 0, ran.stderr[-2000:]
    failed = report(tmp_path)["failed"]
    assert list(failed.values()) == [7] and "maximum context length is N tokens" in next(
        iter(failed))  # fmt: skip
    records = (tmp_path / "out.errors.jsonl").read_text().splitlines()
    numbers = {json.loads(r)["metadata"]["error"].split("contains ")[1][:6] for r in records}
    assert len(records) == 7 and len(numbers) == 7  # each request's own numbers kept there


@pytest.mark.pure
def test_the_line_lists_six_reasons_and_says_how_many_more() -> None:
    tally = RegenTally(conversations_in=10)
    for index in range(8):
        tally.failed[f"reason {chr(97 + index)}"] += 1 + (index < 2)
    line = tally.summary()
    assert 'failed 10: 2 x "reason a", 2 x "reason b"' in line
    assert line.endswith("and 2 more (2 conversations; each in the report)")


@pytest.mark.parametrize("form", ["/v1", "/v1/", "", "/", "/v1/chat/completions/"])
def test_the_endpoint_as_the_readme_writes_it(
    server: StandIn, model: Path, tmp_path: Path, form: str
) -> None:
    data = write(tmp_path / "data.jsonl", [chat("e0", "q"), chat("e1", "r")])
    ran = regen(server, model, tmp_path, data, endpoint=server.url + form)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert set(conversations(tmp_path / "out.jsonl")) == {"e0", "e1"}
    settings = report(tmp_path)["settings"]
    assert settings["endpoint_given"] == server.url + form
    assert settings["endpoint"] == server.url + "/v1/chat/completions"


def test_another_path_is_one_line_naming_the_route(
    server: StandIn, model: Path, tmp_path: Path
) -> None:
    data = write(tmp_path / "data.jsonl", [chat("e0", "q")])
    ran = regen(server, model, tmp_path, data, endpoint=server.url + "/v2/chat")
    line = ran.stderr.strip().splitlines()[-1]
    assert ran.returncode == 1 and line.startswith(ERROR) and "HTTP 404" in line
    assert "the chat route is /v1/chat/completions" in line


def test_a_line_the_loader_cannot_read_is_that_rows_skip(
    server: StandIn, model: Path, tmp_path: Path
) -> None:
    good = [json.dumps(chat(f"g{i}", f"q {i}")).encode() for i in range(3)]
    lines = [
        good[0],
        b'{"id": "sur", "messages": [{"role": "user", "content": "a\\ud800b"}]}',
        good[1],
        b'{"id": "cut", "messages": [',
        b'{"id": "bytes", "messages": [{"role": "user", "content": "caf\xe9"}]}',
        good[2],
        b'{"id": "pair", "messages": [{"role": "user", "content": "\\ud83d\\ude00"}]}',
    ]
    data = tmp_path / "data.jsonl"
    data.write_bytes(b"\n".join(lines) + b"\n")
    ran = regen(server, model, tmp_path, data)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert set(conversations(tmp_path / "out.jsonl")) == {"g0", "g1", "g2", "pair"}
    counted = report(tmp_path)
    assert counted["conversations_in"] == 7 and counted["regenerated"] == 4
    assert counted["skipped"] == {INVALID_UNICODE: 1, MALFORMED_LINE: 1, NOT_UTF8: 1}
    assert f'1 x "{INVALID_UNICODE}"' in ran.stdout.strip().splitlines()[-1]


def test_ctrl_c_writes_the_report(server: StandIn, model: Path, tmp_path: Path) -> None:
    rows = [*(chat(f"i{i}", f"q {i}") for i in range(3)),
            *(chat(f"w{i}", f"wait [slow] {i}") for i in range(3))]  # fmt: skip
    data = write(tmp_path / "data.jsonl", rows)
    # SIGINT at its default, as a terminal's job has it, whatever the suite inherited
    # (tests/interruptible.py: ignored, the run would go on past the SIGINT)
    victim = subprocess.Popen(interruptible(command(server, model, data, "--concurrency", "1")),
                              cwd=tmp_path, env=subprocess_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)  # fmt: skip
    partial = tmp_path / "out.partial.jsonl"
    wait_for_rows(victim, partial, 3)
    time.sleep(1.0)  # the fourth request is held by the server
    send_ctrl_c(victim)
    _, stderr = victim.communicate(timeout=120)
    assert victim.returncode == 130 and "Traceback" not in stderr, stderr[-2000:]
    assert stderr.strip().splitlines()[-1].startswith(f"{ERROR}interrupted (Ctrl-C)")
    counted = report(tmp_path)
    assert counted["exit_code"] == 130 and counted["complete"] is False
    assert counted["regenerated"] == 3 == len(conversations(partial))
    assert counted["conversations_in"] == 6 and counted["not_reached"] == 3
    assert counted["output"] == "out.partial.jsonl"


def test_numerically_equal_settings_are_the_same_setting(
    server: StandIn, model: Path, tmp_path: Path
) -> None:
    data = write(tmp_path / "data.jsonl", [chat(f"n{i}", f"q {i}") for i in range(2)])
    first = regen(server, model, tmp_path, data, "--limit", "1",
                  "--sampling-params", '{"temperature": 1, "top_p": 1}')  # fmt: skip
    assert first.returncode == 0, first.stderr[-2000:]
    resumed = regen(server, model, tmp_path, data, "--resume",
                    "--sampling-params", '{"top_p": 1.0, "temperature": 1.0}',
                    endpoint=server.url + "/v1/chat/completions/")  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert conversations(tmp_path / "out.jsonl") == {"n0": 1, "n1": 1}
    assert "settings_changed" not in report(tmp_path)


def question(index: int) -> str:
    return f"question-{index}-zq"


def rows_without_ids() -> list[dict[str, Any]]:
    """No id: the resume key is upstream's hash of the row. Keys that only some rows have, and
    a column of ints and floats: what Arrow fills with None and makes floats."""
    rows: list[dict[str, Any]] = []
    for index in range(6):
        row: dict[str, Any] = {"messages": [{"role": "user", "content": question(index)}]}
        if index % 2:
            row["source"], row["score"] = "web", 0.5
        else:
            row["score"] = 1
        rows.append(row)
    return rows


def per_question(path: Path) -> Counter[str]:
    """Rows per conversation, known by its question in the row's text (not by its key)."""
    found: Counter[str] = Counter()
    for line in path.read_bytes().splitlines():
        text = json.loads(line)["text"]
        found.update(q for q in map(question, range(6)) if q in text)
    return found


def test_resume_over_an_output_upstream_wrote_adds_each_conversation_once(
    server: StandIn, model: Path, tmp_path: Path
) -> None:
    data = write(tmp_path / "data.jsonl", rows_without_ids())
    upstream = subprocess.run(
        [sys.executable, "-m", "speculators", "regenerate-responses",
         *command(server, model, data, "--limit", "3")[3:]],
        cwd=tmp_path, capture_output=True, text=True, env=subprocess_env(**FIXES_OFF),
        timeout=600,
    )  # fmt: skip
    assert upstream.returncode == 0, upstream.stderr[-2000:]
    assert per_question(tmp_path / "out.jsonl") == Counter(map(question, range(3)))
    earlier = (tmp_path / "out.jsonl").read_bytes()
    resumed = regen(server, model, tmp_path, data, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert (tmp_path / "out.jsonl").read_bytes().startswith(earlier)
    assert per_question(tmp_path / "out.jsonl") == Counter(map(question, range(6)))
    counted = report(tmp_path)
    assert counted["already_done"] == 3 and counted["regenerated"] == 3
    finished = (tmp_path / "out.jsonl").read_bytes()
    again = regen(server, model, tmp_path, data, "--resume")
    assert again.returncode == 0, again.stderr[-2000:]
    assert (tmp_path / "out.jsonl").read_bytes() == finished
    assert again.stdout.strip().endswith("nothing new: out.jsonl is as it was")


def test_a_failure_whose_record_was_not_written_is_not_reached(
    server: StandIn, model: Path, tmp_path: Path
) -> None:
    """The errors file is on a full disk (its name leads to a full tmpfs; the rows' disk has
    room): the refused conversation's record is lost with the run, so it is not counted failed
    (--resume runs it): the report's failures are the records on disk."""
    rows = [chat("ok", "hello"), chat("long", "word " * 2 * CONTEXT), chat("after", "bye")]
    data = write(tmp_path / "data.jsonl", rows)
    with small_disk(tmp_path / "full", "64k") as full:
        with contextlib.suppress(OSError), (full / "filler").open("wb") as filler:
            while True:
                filler.write(b"\0" * 4096)
                filler.flush()
        (tmp_path / "out.partial.errors.jsonl").symlink_to(full / "errors.jsonl")
        ran = regen(server, model, tmp_path, data, "--concurrency", "1",
                    "--max-consecutive-failures", "0")  # fmt: skip
        line = ran.stderr.strip().splitlines()[-1]
        assert ran.returncode == 1 and line.startswith(f"{ERROR}cannot write "), ran.stderr[-2000:]
        assert "No space" in line and (full / "errors.jsonl").read_bytes() == b""
    counted = report(tmp_path)
    assert counted["failed"] == {} and "failed 0" in line
    assert counted["not_reached"] >= 1 and "not reached (run stopped)" in line
    assert counted["conversations_in"] == 3 and counted["regenerated"] == 1
