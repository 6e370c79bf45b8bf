"""``doctor``'s pass over the first rows of a data file: what prepare_data would keep and skip.

Reads, normalises and masks rows with the run's own code (data/read/files.py, the conversations
fix's batch reader, mask_strategy.py) and counts skips in a ledger, so the reasons are the
strings the run's ``compat_report.json`` would hold. Nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.data.account import ledger
from speculators_qwen_compat.data.account.ledger import Ledger, Tally
from speculators_qwen_compat.data.normalize import inline_media, processor_media
from speculators_qwen_compat.data.normalize.normalize import BadConversation
from speculators_qwen_compat.data.read import sources
from speculators_qwen_compat.data.read.files import LINE_COLUMN, SOURCE_COLUMN, read_rows
from speculators_qwen_compat.doctor.mask_strategy import RENDER_BOUNDARY, MaskStrategy, Row
from speculators_qwen_compat.doctor.media_report import SHOWN, MediaReport, ReleaseProcessor, count
from speculators_qwen_compat.fixes.data.conversations import read_batch
from speculators_qwen_compat.fixes.data.row_guard import NOTHING_TO_SUPERVISE


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
    # inline images judged as prepare_data judges them: written once, to a folder of this
    # process removed at its exit (data/normalize/inline_media.py), so nothing is left beside
    # any output
    inline_media.scratch_folder()
    result = DryRun(rows_total=raw.total, pretokenized=raw.pretokenized)
    result.lines, result.sources = raw.lines, raw.sources
    if raw.pretokenized:  # upstream passes such rows through untouched
        return result
    lines, sources = raw.lines, raw.sources
    run = Ledger()
    best = -1
    try:
        with ledger.batch(len(lines)):
            local_template = strategy.kind != RENDER_BOUNDARY  # <= 0.7 apply the template
            batch = read_batch({LINE_COLUMN: lines, SOURCE_COLUMN: sources}, local_template)
            conversations = batch["conversations"]
            tools = batch.get("tools") or [None] * len(conversations)
            for conversation, conv_tools, where in zip(
                conversations, tools, batch[SOURCE_COLUMN], strict=True
            ):
                if count(result.media, conversation):
                    if len(result.media_samples) < SHOWN:
                        result.media_samples.append((where, conversation))
                    if loaded is not None and not local_template:
                        loaded.render_with_it()
                    # a processor that does not load stops the run: media_report says so
                    if local_template and loaded is not None and loaded.get()[1] is None:
                        try:
                            processor_media.for_local_template(conversation, loaded.multimodal())
                        except BadConversation as exc:
                            ledger.skip(str(exc), where)
                            continue
                rows = _supervised_rows(strategy, conversation, conv_tools, max_length, where)
                if not rows:
                    continue
                result.rows_out += len(rows)
                # Show a conversation with several assistant turns when there is one.
                score = min(2, sum(turn["role"] == "assistant" for turn in conversation))
                if score > best:
                    best, result.sample = score, Sample(where, rows)
    finally:
        result.tally = run.close()
    return result


def _supervised_rows(
    strategy: MaskStrategy, conversation: list[dict[str, Any]], tools: Any, limit: int, where: str
) -> list[Row]:
    try:
        rows = strategy.rows(conversation, tools, limit)
    except Exception as exc:  # counted as the run counts it (data/account/ledger.py reject)
        ledger.reject(exc, where)
        return []
    rows = [row for row in rows if any(row.loss_mask)]
    if rows:
        ledger.keep()
    else:
        ledger.skip(NOTHING_TO_SUPERVISE, where)
    return rows
