"""``doctor``'s pass over the first rows of a data file: what prepare_data would keep and skip.

Each row goes through the run's own stages (mask_strategy.py ``rows``: upstream's batch function
with the fixes on), which count it in a ledger, so the reasons are the strings the run's
``compat_report.json`` would hold. Nothing is written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.core.run_options import current_options
from speculators_qwen_compat.data.account import ledger
from speculators_qwen_compat.data.account.ledger import Ledger, Tally
from speculators_qwen_compat.data.normalize.normalize import BadConversation, normalize_row
from speculators_qwen_compat.data.read import sources
from speculators_qwen_compat.data.read.columns import ColumnOptions
from speculators_qwen_compat.data.read.files import read_rows
from speculators_qwen_compat.doctor.mask_strategy import MaskStrategy, Row
from speculators_qwen_compat.doctor.media_report import SHOWN, MediaReport, ReleaseProcessor, count


@dataclass
class Sample:
    """One kept conversation and the rows it gives."""

    source: str
    rows: list[Row]


@dataclass
class DryRun:
    rows_total: int = 0
    tally: Tally = field(default_factory=Tally)
    rows_out: int = 0
    sample: Sample | None = None
    pretokenized: bool = False
    media: MediaReport = field(default_factory=MediaReport)
    #: the first few conversations with images or videos, as read: (source, conversation)
    media_samples: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)
    #: the sampled rows as read (JSON text) and where each came from, for sample_run.py
    lines: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    @property
    def kept(self) -> int:
        return self.tally.kept


def data_files(specs: list[str]) -> tuple[list[Path], list[str]]:
    """The local files ``--data`` names, and what is worth saying of how each was read (a
    Hub folder's split, files not read); anything else is a fatal error."""
    files: list[Path] = []
    said: list[str] = []
    for spec in specs:
        found = sources.resolve(spec)
        if found is None:
            raise CompatError(
                f"--data {spec}: doctor reads local .json/.jsonl/.parquet files and folders, "
                "save_to_disk folders and hf: data"
            )
        said += filter(None, [sources.words(found.record())])
        files.extend(found.sources)
    return files, said


def dry_run(
    files: list[Path],
    strategy: MaskStrategy,
    max_rows: int,
    max_length: int,
    conversations_key: str | None = None,
    loaded: ReleaseProcessor | None = None,
) -> DryRun:
    """``loaded``: what the release loads for the target (asked only when a conversation has
    images or videos, on <= 0.7, to skip them as the run does:
    data/normalize/processor_media.py)."""
    raw = read_rows(files, conversations_key, keep=max_rows)
    result = DryRun(rows_total=raw.total, pretokenized=raw.pretokenized)
    result.lines, result.sources = raw.lines, raw.sources
    if raw.pretokenized:  # upstream passes such rows through untouched
        return result
    lines, sources = raw.lines, raw.sources
    counts = Ledger(str(current_options().ledger_dir))
    best = -1
    try:
        with ledger.batch(len(lines)):
            for line, where in zip(lines, sources, strict=True):
                conversation = _read(line, where)
                processor = strategy.tokenizer
                if conversation is not None and count(result.media, conversation):
                    if len(result.media_samples) < SHOWN:
                        result.media_samples.append((where, conversation))
                    if loaded is not None and loaded.get()[0] is not None:
                        processor = loaded.get()[0]  # what the run loads: it reads the images
                try:
                    rows = strategy.rows(line, where, processor, max_length)
                except CompatError:
                    raise
                except Exception as exc:  # counted as the run counts it (ledger.py reject)
                    ledger.reject(exc, where)
                    continue
                if not rows or conversation is None:
                    continue
                result.rows_out += len(rows)
                # Show a conversation with several assistant turns when there is one.
                score = min(2, sum(turn["role"] == "assistant" for turn in conversation))
                if score > best:
                    best, result.sample = score, Sample(where, rows)
    finally:
        result.tally = counts.close()
    return result


def _read(line: str, source: str) -> list[dict[str, Any]] | None:
    """A sampled row's conversation as the run reads it, for the media report and the choice
    of sample (None where the run skips it: the run's stages count why)."""
    try:
        row = json.loads(line)
        if not isinstance(row, dict):
            return None
        return normalize_row(row, ColumnOptions.of_this_run(), None, source).conversation
    except (ValueError, BadConversation):
        return None
