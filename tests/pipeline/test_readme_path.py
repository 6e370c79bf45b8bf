"""The README's path to a drafter runs as written (tests/pipeline/readme_path.py swaps in the
tier's tiny Qwen3.6-class checkpoint, data, sizes and server, and adds what CPU needs).

The stage (conftest.py) already runs the README's ``prepare``, ``serve-target`` and ``generate``
steps for every target, and test_pipeline.py's training runs the ``train-eagle3``,
``train-dflash`` and ``train-online`` blocks; this module runs the others on the dense
Qwen3.6-class target: ``install`` (into a fresh venv), ``status``, ``doctor``, ``regenerate``
(a generating vLLM started by the README's own line, then the command), ``doctor-endpoint``,
and ``serve-drafter`` + ``acceptance`` (a vLLM serving the target with the EAGLE-3 drafter the
README's command trained, measured by the README's ``acceptance`` command, whose figures must
equal the increase of vLLM's own counters). Each extra server runs beside
the stage's for the length of its test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import vllm_server

from . import readme_path
from .conftest import LAYER_IDS, Stage, execute, prepare_python, swap_for
from .test_pipeline import saved, train

ONE_KIND = pytest.mark.parametrize("stage", ["qwen3_5"], indirect=True)
#: Which test runs each README step (the stage and test_pipeline.py run the rest).
RUN_BY = {
    "install": "test_install",
    "status": "test_status",
    "doctor": "test_doctor",
    "regenerate": "test_regenerate",
    "prepare": "conftest.stage",
    "serve-target": "conftest.stage",
    "doctor-endpoint": "test_doctor_endpoint",
    "generate": "conftest.stage",
    "train-eagle3": "test_pipeline.test_offline_training_step",
    "train-dflash": "test_pipeline.test_offline_training_step",
    "train-online": "test_pipeline.test_online_training_step",
    "serve-drafter": "test_serve_the_drafter",
    "serve-dflash": "test_serve_the_dflash_drafter",
    "acceptance": "test_serve_the_drafter",
}


def swap(stage: Stage):
    return swap_for(stage.model, stage.work, stage.data, stage.server.url)


def test_every_step_of_the_readme_is_run() -> None:
    """The README's marked blocks are the steps this tier runs, in the README's order."""
    assert list(readme_path.steps()) == list(readme_path.STEPS) == list(RUN_BY)
    head = readme_path.README.read_text(encoding="utf-8").splitlines()[:120]
    for last in ("serve-drafter", "serve-dflash"):
        marker = f"<!-- path: {last} -->"
        assert any(marker in line for line in head), f"{last} left screen 1"


def test_install(tmp_path: Path) -> None:
    """``pip install`` of this checkout into a fresh venv (pip builds the wheel), then the
    console script the README names, from that venv."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    (install,) = readme_path.command("install", readme_path.Swap(Path("-"), tmp_path))
    assert install[0] == "pip", install
    done = subprocess.run(
        [str(venv / "bin" / "pip"), "--disable-pip-version-check", "-q", *install[1:]],
        capture_output=True, text=True, timeout=600,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (status,) = readme_path.command("status", readme_path.Swap(Path("-"), tmp_path))
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the fresh venv alone
    ran = subprocess.run(
        [str(venv / "bin" / status[0]), *status[1:]], capture_output=True, text=True, timeout=300,
        env=clean,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.startswith("speculators not installed"), ran.stdout  # a venv without it


@ONE_KIND
def test_status(stage: Stage) -> None:
    (status,) = readme_path.command("status", swap(stage))
    ran = execute(status, stage.work)
    assert ran.returncode == 0, ran.stderr[-3000:]
    from importlib.metadata import version

    assert ran.stdout.startswith(f"speculators {version('speculators')} (tested)"), ran.stdout
    for fix in ("verifier_norm", "mask_token", "local_render", "conversations"):
        assert re.search(rf"^\s+{fix}\s+applied\b", ran.stdout, re.MULTILINE), ran.stdout


@ONE_KIND
def test_doctor(stage: Stage) -> None:
    """On the stage's data, images included: in the venv prepare_data ran in (Pillow and
    torchvision, README step 1)."""
    (doctor,) = readme_path.command("doctor", swap(stage))
    ran = execute(doctor, stage.work, python=prepare_python(stage.kind))
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "render boundary: one row per assistant turn" in ran.stdout, ran.stdout
    assert "[[" in ran.stdout, ran.stdout  # one conversation with its trainable text


@ONE_KIND
def test_regenerate(stage: Stage, tmp_path: Path) -> None:
    """The README's server line (a second vLLM, generating with the tool-call and reasoning
    parsers) and command: every conversation of chats.jsonl is counted, and no failure is the
    server's setup (before that line had the parsers, every tool conversation failed with
    '"auto" tool choice requires --enable-auto-tool-choice ...'). A random model's replies
    never leave their thinking within the tier's --max-tokens, so the run may regenerate
    nothing and then ends with our one line and exit 1, by design; whether replies are right is
    tests/test_regenerate_responses.py's (a steered server)."""
    serve, regenerate = readme_path.command("regenerate", swap(stage))
    with vllm_server.serve(readme_path.with_cpu(serve)) as server:
        served = swap_for(stage.model, tmp_path, stage.data, server.url)
        _, regenerate = readme_path.command("regenerate", served)
        ran = execute(regenerate, tmp_path, python=prepare_python(stage.kind), timeout=900)
    out = ran.stdout + ran.stderr
    report = json.loads((tmp_path / "replies.jsonl.report.json").read_text())
    total = 8 + stage.images
    assert report["conversations_in"] == total and report["errors"] == 0, report
    model_or_data = ("reply still thinking", "reply cut at")
    # The README's generating server has no --allowed-local-media-path: it may refuse the image
    # conversations (vLLM 0.32: 400 or 500, or it drops the connection: ClientOSError or
    # ServerDisconnectedError, as CI saw once), each that conversation's counted failure, never
    # a text one's and never an error of ours.
    refused = ("Unsupported chat content part", "HTTP 400", "HTTP 500", "ClientOSError")
    refused += ("ServerDisconnectedError",)
    failed = report["failed"]
    assert all(r.startswith(model_or_data + refused) for r in failed), failed
    assert sum(n for r, n in failed.items() if r.startswith(refused)) <= stage.images, failed
    if report["regenerated"] or report["cut_short"]:
        assert ran.returncode == 0, out[-3000:]
    else:
        assert ran.returncode == 1, out[-3000:]
        last = out.strip().splitlines()[-1]
        wanted = "speculators_qwen_compat: error: no conversation was regenerated "
        wanted += f"(regenerated 0 of {total} "
        assert last.startswith(wanted), last


@ONE_KIND
def test_doctor_endpoint(stage: Stage) -> None:
    (doctor,) = readme_path.command("doctor-endpoint", swap(stage))
    ran = execute(doctor, stage.work)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "served model: matches" in ran.stdout, ran.stdout
    assert f"layers: match: the server extracts {len(LAYER_IDS)} layers" in ran.stdout


def _acceptance(stage: Stage, server: Any) -> dict[str, Any]:
    """The README's acceptance step against ``server`` on the stage's text conversations (the
    README's server line has no --allowed-local-media-path): its figures, each checked against
    the increase of /metrics read around the run by Prometheus' own parser."""
    from metrics_oracle import spec_counters

    heldout = stage.work / "heldout-text.jsonl"
    rows = [line for line in stage.data.read_text().splitlines() if '"image' not in line]
    heldout.write_text("\n".join(rows) + "\n")
    served = swap_for(stage.model, stage.work, stage.data, server.url)
    served.paths["heldout.jsonl"] = heldout
    (command,) = readme_path.command("acceptance", served)
    # a folder per measurement: --json never replaces an earlier run's file (the EAGLE-3 and
    # DFlash steps each write acceptance.json, as a user measuring twice names a new one)
    where = Path(tempfile.mkdtemp(prefix="acceptance-", dir=stage.work))
    before = spec_counters(server.url)
    done = execute(command, where)
    after = spec_counters(server.url)
    assert done.returncode == 0, done.stdout + done.stderr
    (figures,) = json.loads((where / "acceptance.json").read_text())["endpoints"]
    for name in ("drafts", "draft_tokens", "accepted_tokens"):
        assert figures[name] == after[name] - before[name], (name, figures, before, after)
    added = [after["per_position"][p] - before["per_position"].get(p, 0)
             for p in sorted(after["per_position"])]  # fmt: skip
    assert figures["per_position_accepted"] == added, (figures, before, after)
    assert figures["requests"] == len(rows) and "mean acceptance length" in done.stdout
    return figures


@ONE_KIND
def test_serve_the_dflash_drafter(stage: Stage) -> None:
    """vLLM serves the target with the DFlash drafter the README's command saved, as saved,
    with the README's DFlash line (without the fixes vLLM refuses it: "does not support M-RoPE
    yet", tests/test_served_drafter.py); a completion drafts through it."""
    if not (saved(stage, "dflash", online=False) / "0").is_dir():  # run out of order
        result, _ = train(stage, "dflash", online=False)
        assert result.returncode == 0, result.stderr[-3000:]
    (serve,) = readme_path.command("serve-dflash", swap(stage))
    with vllm_server.serve(readme_path.with_cpu(serve)) as server:
        figures = _acceptance(stage, server)
    assert figures["drafts"] > 0 and figures["draft_tokens"] == 15 * figures["drafts"], figures


@ONE_KIND
def test_serve_the_drafter(stage: Stage) -> None:
    """vLLM serves the target with the drafter the README's EAGLE-3 command saved, as saved;
    the README's acceptance command reads its counters (figures = /metrics' increase)."""
    if not (saved(stage, "eagle3", online=False) / "0").is_dir():  # run out of order
        result, _ = train(stage, "eagle3", online=False)
        assert result.returncode == 0, result.stderr[-3000:]
    (serve,) = readme_path.command("serve-drafter", swap(stage))
    with vllm_server.serve(readme_path.with_cpu(serve)) as server:
        figures = _acceptance(stage, server)
    assert figures["draft_tokens"] == 3 * figures["drafts"] > 0, figures
    assert 0 <= figures["accepted_tokens"] <= figures["draft_tokens"], figures
