"""One run's options (``RunOptions``): the data flags, strictness, media folders, processor kwargs,
the render retry budget and the ledger's folder. Fixed once (``fix``), before upstream starts, by
the entry point; map workers and ranks inherit them in ``RUN_ENV`` (JSON). With the switch and
``SPECULATORS_QWEN_COMPAT_DEBUG`` it is the package's only variable."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from typing import Any

RUN_ENV = "SPECULATORS_QWEN_COMPAT_RUN"


@dataclass(frozen=True)
class RunOptions:
    """What the entry point was told; the defaults are a run given no flags."""

    conversations_key: str | None = None  # --conversations-key
    prompt_columns: tuple[str, ...] = ()  # --prompt-column (joined with a newline)
    response_column: str | None = None  # --response-column
    system_column: str | None = None  # --system-column
    unknown_roles: str = "release"  # --unknown-roles
    strict_data: bool = False  # --strict-data
    mm_processor_kwargs: dict[str, Any] = field(default_factory=dict)  # --mm-processor-kwargs
    media_root: str | None = None  # --media-dir: relative media paths resolve here
    inline_media_dir: str | None = None  # where inline images are written (<output>-media)
    render_retry_seconds: float | None = None  # --render-retry-seconds (None: the default)
    ledger_dir: str | None = None  # the skip ledger of the run, its map workers' counts

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunOptions:
        values = json.loads(text)
        names = {f.name for f in dataclasses.fields(cls)}
        kept = {k: v for k, v in values.items() if k in names}
        if "prompt_columns" in kept:
            kept["prompt_columns"] = tuple(kept["prompt_columns"])
        return cls(**kept)


_parsed: tuple[str, RunOptions] | None = None


def current_options() -> RunOptions:
    """This process's options: the inherited ``RUN_ENV`` (parsed once per value), or the
    defaults."""
    global _parsed
    raw = os.environ.get(RUN_ENV, "")
    if _parsed is None or _parsed[0] != raw:
        try:
            options = RunOptions.from_json(raw) if raw else RunOptions()
        except (ValueError, TypeError):  # not ours to fail on: a run with no flags
            options = RunOptions()
        _parsed = (raw, options)
    return _parsed[1]


def fix(options: RunOptions) -> RunOptions | None:
    """Fix ``options`` for this process and the processes it starts, before upstream starts
    (the entry point; a run without one, at its start: data/account/run.py); the options as
    they were (for ``restore``: None when none were set)."""
    before = current_options() if os.environ.get(RUN_ENV) else None
    os.environ[RUN_ENV] = options.to_json()
    return before


def restore(options: RunOptions | None) -> None:
    """Put back what ``fix`` returned (None: the variable was unset)."""
    if options is None:
        os.environ.pop(RUN_ENV, None)
    else:
        os.environ[RUN_ENV] = options.to_json()
