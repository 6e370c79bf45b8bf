"""``--render-endpoint URL``: a server that goes away fails the run; one that comes back loses
nothing; a wrong URL fails at once; only the server's refusal of a conversation is a skip.

Against a real vLLM 0.32 render server (tests/vllm_server.py): the wrong URL on every release that
renders through it (0.8+; each in its own environment, tools/release_python.sh), the restart and the
kill on the newest (what they test is our render client, data/render/render_faults.py; each 0.8+
suite drives every fault class through that release's own pipeline with two map workers,
tests/test_render_fault_classes.py; two server starts a release cost CI minutes).
Each run renders ``ROWS`` conversations with one map worker; the test acts on the server once
the server's access log shows ``AFTER`` render requests answered (mid-run, no timing guesses):
- restarted (stopped, then started again on the same port) within the retry budget: the run
  ends with exit 0 and every conversation kept;
- killed (SIGKILL) with a 20 s retry budget: the run ends with exit 1 once the budget is spent,
  one line naming the server, the cause and how many conversations were done, no --output and
  no skip counted;
- ``--render-endpoint URL/wrong`` (404 on every request): exit 1 within seconds.
The session's shared server answers the wrong-URL run; the other two start their own.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import vllm_server
from conftest import (
    good_rows,
    last_line,
    read_report,
    rejected_rows,
    run_options_env,
    subprocess_env,
    write_dataset,
)
from packaging.version import Version

from speculators_qwen_compat import demo
from speculators_qwen_compat.core.releases import TESTED_RELEASES

ROOT = Path(__file__).resolve().parents[1]
RENDER_RELEASES = [r for r in TESTED_RELEASES if Version("0.8") <= Version(r)]
ROWS = 300
AFTER = 250  # render requests answered before the server is touched (a conversation: 2-8)
KILLED_BUDGET = 20.0
FAULT_RELEASES = RENDER_RELEASES[-1:]  # the module docstring says why

pytestmark = pytest.mark.vllm


def _start_run(release: str, output: Path, data: Path, endpoint: str, model: Path,
               **env: str) -> subprocess.Popen:  # fmt: skip
    """prepare_data of ``release`` against ``endpoint``, started (not waited for)."""
    run_env = subprocess_env(**env)
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    run_env["PYTHONPATH"] = os.pathsep.join(
        p
        for p in paths
        if p and Path(p).parent.parent.name != "rel"  # not pytest's release
    )
    command = [
        str(ROOT / "tools" / "release_python.sh"), release, "-m",
        "speculators_qwen_compat.prepare_data", "--model", str(model), "--data", str(data),
        "--output", str(output), "--seq-length", "512", "--num-preprocessing-workers", "1",
        "--render-endpoint", endpoint,
    ]  # fmt: skip
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=run_env
    )


def _renders_answered(server: Any) -> int:
    text = server.log.read_text(errors="replace") if server.log.exists() else ""
    return text.count(f"POST {vllm_server.RENDER_PATH}")


def _wait_for_renders(server: Any, run: subprocess.Popen, count: int) -> None:
    deadline = time.monotonic() + 600
    while _renders_answered(server) < count:
        assert run.poll() is None, run.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the run never reached the server"
        time.sleep(0.2)


@pytest.fixture
def own_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A render server of this test's own (it gets stopped and restarted): (model, port, box)
    where ``box["server"]`` is the server running now."""
    # start-up is 6-14 s on an idle machine; minutes were seen with every core busy
    monkeypatch.setattr(vllm_server, "START_TIMEOUT", 900.0)
    # the tiny demo vocabulary: what is tested is the server's presence, not its ids
    template = demo.chat_template("qwen36")
    model = vllm_server.model_folder(tmp_path / "model", template, demo.MODEL_DIR, vocab_size=1280)
    port = vllm_server.free_port()
    box = {"server": vllm_server.start(model, port=port)}
    yield model, port, box
    box["server"].stop()


def _data(tmp_path: Path) -> Path:
    rejected = [row for _, row in rejected_rows()]
    return write_dataset(tmp_path / "d.jsonl", good_rows(ROWS - len(rejected)) + rejected)


@pytest.mark.parametrize("release", FAULT_RELEASES)
def test_a_restarted_server_loses_nothing_and_a_killed_one_fails_the_run(
    release: str, own_server: Any, tmp_path: Path
) -> None:
    model, port, box = own_server
    data = _data(tmp_path)
    url = box["server"].url

    # a budget longer than a restart takes on a loaded machine (start-up: 10 s idle, 140 s seen)
    run = _start_run(
        release, tmp_path / "out", data, url, model, **run_options_env(render_retry_seconds=900)
    )
    _wait_for_renders(box["server"], run, AFTER)
    box["server"].stop()
    box["server"] = vllm_server.start(model, port=port)
    out, err = run.communicate(timeout=900)
    assert run.returncode == 0, err[-3000:]
    report = read_report(tmp_path / "out")
    # every conversation the server did not refuse is kept: the template's own refusals only
    assert report["conversations_in"] == ROWS
    assert report["conversations_kept"] == ROWS - len(rejected_rows())
    assert sum(report["skipped"].values()) == len(rejected_rows())
    assert not any("render server" in reason for reason in report["skipped"])
    assert "answers again after" in err

    run = _start_run(release, tmp_path / "out2", data, url, model,
                     **run_options_env(render_retry_seconds=KILLED_BUDGET))  # fmt: skip
    _wait_for_renders(box["server"], run, AFTER)
    os.killpg(box["server"].process.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    out, err = run.communicate(timeout=900)
    took = time.monotonic() - killed_at
    assert run.returncode == 1, err[-3000:]
    line = last_line(err)
    assert line.startswith(f"speculators_qwen_compat: error: render server {url} failed: "), line
    assert "conversations were done and nothing was written" in line
    done = int(re.search(r"; (\d+) conversations were done", line).group(1))
    assert 0 < done < ROWS, line
    # the retries stop within the budget (the message's own count), and the run ends in
    # minutes, not hours (wall time here includes the exit of a process on a busy machine)
    spent = int(re.search(r"attempts over (\d+) s\)", line).group(1))
    assert spent <= KILLED_BUDGET, line
    assert took < 300, took
    assert not (tmp_path / "out2").exists()
    assert "skipped" not in out


@pytest.mark.parametrize("release", RENDER_RELEASES)
def test_a_wrong_url_fails_the_run_at_once(release: str, vllm_render: Any, tmp_path: Path) -> None:
    model, server = vllm_render("qwen36")
    data = write_dataset(tmp_path / "d.jsonl", good_rows(6))
    started = time.monotonic()
    run = _start_run(release, tmp_path / "out", data, server.url + "/wrong", model)
    _, err = run.communicate(timeout=600)
    assert run.returncode == 1, err[-3000:]
    line = last_line(err)
    assert line.startswith(
        f"speculators_qwen_compat: error: render server {server.url}/wrong failed: HTTP 404"
    ), line
    assert "; 0 conversations were done" in line
    assert time.monotonic() - started < 120
    assert not (tmp_path / "out").exists()
