"""Weight-0 turns reach the row guard, or the run stops: the conversations stage hands each
conversation's weight-0 turns on (data/normalize/batch.py ReadConversation) and checks after
upstream's batch that the row guard read them; with the guard off, such data is refused in one
line, never trained on. Data without weights runs as before with the guard off."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from conftest import PACKAGE_MAIN, last_line, prepare, read_report, subprocess_env

WEIGHTED = {
    "messages": [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris, as far as I recall maybe.", "weight": 0},
        {"role": "user", "content": "Can you be more accurate?"},
        {"role": "assistant", "content": "Paris is the capital of France.", "weight": 1},
    ]
}
PLAIN = {"messages": [WEIGHTED["messages"][0], {"role": "assistant", "content": "Paris."}]}


def _data(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_weights_without_the_row_guard_are_refused(qwen36_dir: Path, tmp_path: Path) -> None:
    data = _data(tmp_path / "weighted.jsonl", [PLAIN, WEIGHTED, PLAIN])
    ran = prepare(qwen36_dir, tmp_path / "out", data, SPECULATORS_QWEN_COMPAT="off:row_guard")
    assert ran.returncode == 1, ran.stderr[-2000:]
    line = last_line(ran.stderr)
    assert line.startswith("speculators_qwen_compat: error: "), line
    assert "1 conversation(s) have assistant turns marked weight 0" in line, line
    assert "row_guard" in line and "Traceback" not in ran.stderr[-400:]
    assert not (tmp_path / "out").exists()


def test_the_check_is_quiet_when_the_guard_runs_or_no_turn_is_weighted(
    qwen36_dir: Path, tmp_path: Path
) -> None:
    weighted = _data(tmp_path / "weighted.jsonl", [PLAIN, WEIGHTED, PLAIN])
    ran = prepare(qwen36_dir, tmp_path / "on", weighted)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert read_report(tmp_path / "on")["conversations_kept"] == 3
    plain = _data(tmp_path / "plain.jsonl", [PLAIN, PLAIN])
    ran = prepare(qwen36_dir, tmp_path / "off", plain, SPECULATORS_QWEN_COMPAT="off:row_guard")
    assert ran.returncode == 0, ran.stderr[-2000:]


def test_doctor_shows_weight_zero_turns_as_context(qwen36_dir: Path, tmp_path: Path) -> None:
    """doctor's sample marks only what the run trains: the weight-0 reply stays outside
    [[ ]]. On <= 0.7 the sample is the conversation's one row, whose mask doctor now unsets as
    the row guard does (before, the reply was marked); on 0.8+ the sample is the last turn's
    boundary row, where the reply is context either way (doctor drops the weight-0 turn's own
    row as the run does; its counts come from the sample run)."""
    data = _data(tmp_path / "weighted.jsonl", [WEIGHTED])
    doctor = ["doctor", "--model", str(qwen36_dir), "--data", str(data), "--seq-length", "512"]
    ran = subprocess.run(
        [sys.executable, "-m", PACKAGE_MAIN, *doctor],
        capture_output=True, text=True, env=subprocess_env(), timeout=600,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    marked = " ".join(re.findall(r"\[\[(.*?)\]\]", ran.stdout, flags=re.DOTALL))
    assert "Paris is the capital of France." in marked, ran.stdout[-3000:]
    assert "as far as I recall" not in marked, ran.stdout[-3000:]
