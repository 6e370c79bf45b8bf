"""``doctor``'s promise: prepare_data itself, run on doctor's sample with the run's worker count.

The dry run (dry_run.py) reads and masks rows in this process, but a run also loads the
target's processor, splits the rows over ``--num-preprocessing-workers`` map workers, joins
their shards and saves them; each can fail where the dry run cannot. So the sample's rows are
written to a temporary JSONL and our prepare_data entry point runs on them in a child
interpreter, with doctor's data flags: its counts are what doctor says the run "would keep",
and a fatal error of that run is doctor's. Nothing outside a temporary folder is written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: prepare_data's data flags doctor takes too, forwarded to the sample's run.
FORWARDED = (
    "conversations_key", "prompt_column", "response_column", "system_column", "unknown_roles",
    "mm_processor_kwargs",
)  # fmt: skip
ERROR_PREFIX = "speculators_qwen_compat: error: "


@dataclass
class SampleRun:
    """What prepare_data did with the sample: its exit code, last line and report."""

    workers: int
    code: int
    last_line: str
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.code != 0

    @property
    def error(self) -> str:
        """The run's fatal error (without the prefix)."""
        return self.last_line.removeprefix(ERROR_PREFIX)


def run_sample(
    lines: list[str],
    sources: list[str],
    model: str,
    workers: int,
    seq_length: int,
    flags: Any,
    timeout: float = 3600,
) -> SampleRun:
    """prepare_data on ``lines`` (doctor's sample, one JSON text per row) in a child
    interpreter; the report's examples name the rows' own ``sources``, not the sample file."""
    with tempfile.TemporaryDirectory(prefix="sqc-doctor-") as folder:
        data = Path(folder) / "sample.jsonl"
        data.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        output = Path(folder) / "prepared"
        command = [
            sys.executable, "-m", "speculators_qwen_compat.prepare_data", "--model", model,
            "--data", str(data), "--output", str(output), "--seq-length", str(seq_length),
            "--num-preprocessing-workers", str(workers), *_forwarded(flags),
        ]  # fmt: skip
        env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
        # in the user's folder, as their run: a relative --model or image path means the same
        ran = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
        text = ran.stderr if ran.returncode else ran.stdout
        lines_out = [line for line in text.splitlines() if line.strip()]
        report_path = output / "compat_report.json"
        report = {}
        if report_path.is_file():
            report = json.loads(report_path.read_text(encoding="utf-8"))
    _name_sources(report, str(data), sources)
    return SampleRun(workers, ran.returncode, lines_out[-1] if lines_out else "", report)


def _forwarded(flags: Any) -> list[str]:
    out: list[str] = []
    for name in FORWARDED:
        value = getattr(flags, name, None)
        if value:
            out += [f"--{name.replace('_', '-')}", str(value)]
    return out


def _name_sources(report: dict[str, Any], sample: str, sources: list[str]) -> None:
    """``sample.jsonl:N`` in the report's examples -> the N-th sampled row's own source, in
    the data's order (the workers finish in any order)."""
    for reason, examples in report.get("skipped_examples", {}).items():
        numbered = []
        for example in examples:
            where, _, line = str(example).rpartition(":")
            if where == sample and line.isdigit() and 0 < int(line) <= len(sources):
                numbered.append((int(line), sources[int(line) - 1]))
            else:
                numbered.append((len(sources) + 1, example))
        report["skipped_examples"][reason] = [name for _, name in sorted(numbered)]
