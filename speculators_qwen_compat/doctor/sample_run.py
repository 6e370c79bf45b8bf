"""``doctor``'s promise: prepare_data itself, run on doctor's sample with the run's worker count.

Why: the dry run masks rows in this process, but a run also loads the processor, maps over
workers, joins and saves shards. Our entry point runs on the sample in a child interpreter: its
counts are what doctor says the run "would keep". Only a temporary folder is written.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speculators_qwen_compat.cli import flags as cli_flags

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
        data.write_text("".join(_one_line(line) + "\n" for line in lines), encoding="utf-8")
        output = Path(folder) / "prepared"
        command = [
            sys.executable, "-m", "speculators_qwen_compat.prepare_data", "--model", model,
            "--data", str(data), "--output", str(output), "--seq-length", str(seq_length),
            "--num-preprocessing-workers", str(workers), *_forwarded(flags),
            *_media_dir(flags, sources),
        ]  # fmt: skip
        env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
        # in the user's folder, as their run: a relative --model or image path means the same
        with _stopped_by_sigterm():  # a stopped doctor stops its run and removes the sample
            ran = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
        text = ran.stderr if ran.returncode else ran.stdout
        text = text.replace(str(data), "doctor's sample of --data, row")
        lines_out = [line for line in text.splitlines() if line.strip()]
        report_path = output / "compat_report.json"
        report = {}
        if report_path.is_file():
            report = json.loads(report_path.read_text(encoding="utf-8"))
    _name_sources(report, str(data), sources)
    return SampleRun(workers, ran.returncode, lines_out[-1] if lines_out else "", report)


def _one_line(text: str) -> str:
    """A sampled row as one JSONL line: a row of a pretty-printed ``.json`` array spans several
    lines; a row that does not parse goes as it is, for the run to count as malformed."""
    try:
        row = json.loads(text)
    except ValueError:
        return " ".join(text.splitlines())
    try:
        return json.dumps(row, ensure_ascii=False).encode("utf-8").decode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: kept as its escape, for the run to count
        return json.dumps(row)


@contextmanager
def _stopped_by_sigterm() -> Iterator[None]:
    """SIGTERM (``timeout``, a scheduler) ends doctor as Ctrl-C does: the child run is killed
    and the temporary folder removed on the way out, not left behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _media_dir(flags: Any, sources: list[str]) -> list[str]:
    """The sample lives in a temporary folder: relative media paths, which the run resolves
    against the data file's folder, are resolved against that folder here (``--media-dir``),
    unless the user named one; the working directory stays the user's."""
    if getattr(flags, cli_flags.MEDIA_DIR.dest, None):
        return []
    from speculators_qwen_compat.data.normalize.media_paths import data_folder

    folders = {data_folder(source) for source in sources}
    if len(folders) != 1 or None in folders:
        return []
    (folder,) = folders
    return [] if folder == Path.cwd() else [cli_flags.MEDIA_DIR.name, str(folder)]


def _forwarded(flags: Any) -> list[str]:
    """prepare_data's data flags doctor was given (cli/flags.py), for the sample's run."""
    out: list[str] = []
    for flag in cli_flags.of_command(cli_flags.DOCTOR):
        value = getattr(flags, flag.dest, None)
        if flag.data and value:
            out += [flag.name, str(value)]
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
