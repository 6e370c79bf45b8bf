"""Our own flags, each declared once: name, type, default, help and the commands that take it.

prepare_data, doctor and regenerate_responses add their flags from here (argparse; typer for the
options regenerate-responses adds to upstream's command) and read them by ``Flag.dest``.
Upstream's flags are not here: the installed release declares them.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from speculators_qwen_compat.data.render.render_faults import RETRY_SECONDS

PREPARE_DATA = "prepare_data"
DOCTOR = "doctor"
REGENERATE = "regenerate_responses"
#: doctor's help for the data flags it takes from prepare_data
AS_FOR_PREPARE_DATA = "as for prepare_data"
#: the title of prepare_data's block of our flags, after the release's own help
BLOCK_TITLE = "speculators_qwen_compat options (besides the release's own, above):"
_BLOCK_HEAD = 24  # the width of "  --flag METAVAR" in that block, before the help column


@dataclass(frozen=True)
class Flag:
    """One flag. ``help``: broken where prepare_data's block breaks its lines (argparse and typer
    join them; ``%(default)s``: argparse's); ``metavar``: what that block shows after the name.
    ``data``: a data flag of prepare_data that doctor takes too and hands to its sample run.
    ``type`` bool: a switch. ``minimum``: the least value typer accepts."""

    name: str
    help: str
    commands: tuple[str, ...]
    type: type = str
    default: Any = None
    metavar: str = ""
    repeat: bool = False
    nargs: str | None = None
    required: bool = False
    minimum: float | None = None
    data: bool = False

    @property
    def dest(self) -> str:
        """The attribute (argparse) or parameter (typer) its value is read from."""
        return self.name.removeprefix("--").replace("-", "_")


def _data_flag(name: str, metavar: str, help: str) -> Flag:
    return Flag(name, help, (PREPARE_DATA, DOCTOR), metavar=metavar, data=True)


MODEL = Flag("--model", "target model id or folder", (DOCTOR,), required=True)
DATA = Flag("--data", "local .json/.jsonl file or folder (repeatable)", (DOCTOR,), repeat=True)
ROWS = Flag("--rows", "rows to check (default %(default)s)", (DOCTOR,), int, 200)
SEQ_LENGTH = Flag(  # prepare_data's own default
    "--seq-length", "as for prepare_data (default %(default)s)", (DOCTOR,), int, 8192
)
NUM_PREPROCESSING_WORKERS = Flag(
    "--num-preprocessing-workers",
    "as for prepare_data (default %(default)s, the README's): the sample is run through "
    "prepare_data with this many map workers",
    (DOCTOR,),
    int,
    8,  # the README's prepare_data command
)
CONVERSATIONS_KEY = _data_flag(
    "--conversations-key",
    "NAME",
    "column holding the conversation (default: found row by row:\n"
    "'conversations', 'messages', 'conversation', any column of turns)",
)
PROMPT_COLUMN = _data_flag(
    "--prompt-column",
    "A[,B]",
    "flat instruction data: the user turn is these columns joined by a\n"
    "newline (e.g. instruction,input) ...",
)
RESPONSE_COLUMN = _data_flag(
    "--response-column", "C", "... and the assistant turn is this column (e.g. output)"
)
SYSTEM_COLUMN = _data_flag(
    "--system-column", "S", "a column holding the system prompt (default: 'system' if present)"
)
UNKNOWN_ROLES = _data_flag(
    "--unknown-roles",
    "MODE",
    "roles outside the table: 'release' (default: what the installed\n"
    "speculators does: dropped <= 0.7, assistant 0.8+), 'assistant',\n"
    "'drop', or 'skip' (skip the conversation, counted)",
)
MEDIA_DIR = _data_flag(
    "--media-dir",
    "DIR",
    "the folder relative image/video paths are relative to (default:\n"
    "the data file's folder where the file is found there, else the\n"
    "working directory; docs/images.md)",
)
MM_PROCESSOR_KWARGS = _data_flag(
    "--mm-processor-kwargs",
    "J",
    "the vLLM server's --mm-processor-kwargs (JSON, e.g.\n"
    '\'{"max_pixels": 1003520}\' or \'{"size": {"longest_edge": N}}\'):\n'
    "images are counted with it locally and it is sent with every\n"
    "render request (0.8+; docs/images.md)",
)
ENDPOINT = Flag(
    "--endpoint",
    "a vLLM serving hidden states (http://HOST:PORT/v1): check its model name and extracted "
    "layers against --model and --target-layer-ids",
    (DOCTOR,),
)
TARGET_LAYER_IDS = Flag(
    "--target-layer-ids",
    "as training will pass them (default: upstream's [2, n/2, n-3])",
    (DOCTOR,),
    int,
    nargs="+",
)
DRAFTER = Flag(
    "--drafter",
    "a drafter folder as training saved it: will vLLM load it and serve it as trained for "
    "--model, and the vllm serve line (only this check runs)",
    (DOCTOR,),
)
# Text, checked by prepare_data (one line, not argparse's usage error); not given: a parent's value
# or RETRY_SECONDS.
RENDER_RETRY_SECONDS = Flag(
    "--render-retry-seconds",
    "rendering on a vLLM server (0.8+): how long each render request\n"
    f"is retried while the server is unreachable (default {RETRY_SECONDS:g})",
    (PREPARE_DATA,),
    metavar="S",
)
STRICT_DATA = Flag(
    "--strict-data",
    "data-quality warnings (placeholder or boilerplate replies,\n"
    "prompt-only rows, exact duplicates) are fatal",
    (PREPARE_DATA,),
    bool,
    False,
)
DEBUG = Flag(
    "--debug",
    "show the traceback of a fatal error\n(also SPECULATORS_QWEN_COMPAT_DEBUG=1)",
    (PREPARE_DATA, DOCTOR),
    bool,
    False,
)
# A long reasoning at 27B on a busy server takes minutes; an hour is a request nobody will answer.
REQUEST_TIMEOUT = Flag(
    "--request-timeout",
    "Seconds one try of one request may take before it is retried (--max-retries); after the "
    "last try the server is asked whether it is alive: alive, the conversation is counted "
    "failed and the run goes on",
    (REGENERATE,),
    float,
    3600.0,
    minimum=1.0,
)
# Failures in a row with the server alive: something is wrong for every request, not for one.
MAX_CONSECUTIVE_FAILURES = Flag(
    "--max-consecutive-failures",
    "Stop the run (exit 1, resumable) when this many conversations in a row failed while the "
    "server answered /v1/models (0: never)",
    (REGENERATE,),
    int,
    5,
    minimum=0,
)
ALLOW_CHANGED_SETTINGS = Flag(
    "--allow-changed-settings",
    "With --resume: go on although --model, --max-tokens or --sampling-params differ from the "
    "earlier run's (refused otherwise); the report keeps both",
    (REGENERATE,),
    bool,
    False,
)

#: Every flag, in the order the commands list them.
FLAGS: tuple[Flag, ...] = (
    MODEL, DATA, ROWS, SEQ_LENGTH, NUM_PREPROCESSING_WORKERS, CONVERSATIONS_KEY, PROMPT_COLUMN,
    RESPONSE_COLUMN, SYSTEM_COLUMN, UNKNOWN_ROLES, MEDIA_DIR, MM_PROCESSOR_KWARGS, ENDPOINT,
    TARGET_LAYER_IDS, DRAFTER, RENDER_RETRY_SECONDS, STRICT_DATA, DEBUG, REQUEST_TIMEOUT,
    MAX_CONSECUTIVE_FAILURES, ALLOW_CHANGED_SETTINGS,
)  # fmt: skip


def of_command(command: str) -> tuple[Flag, ...]:
    """The flags ``command`` takes, in order."""
    return tuple(flag for flag in FLAGS if command in flag.commands)


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """Add ``command``'s flags to an argparse parser."""
    for flag in of_command(command):
        help = AS_FOR_PREPARE_DATA if command == DOCTOR and flag.data else flag.help
        options: dict[str, Any] = {"help": help}
        if flag.type is bool:
            options["action"] = "store_true"
        else:
            if flag.type is not str:
                options["type"] = flag.type
            if flag.repeat:
                options["action"] = "append"
            if flag.nargs:
                options["nargs"] = flag.nargs
            if flag.required:
                options["required"] = True
            else:  # a list default is copied: argparse appends to it
                options["default"] = [] if flag.repeat else flag.default
        parser.add_argument(flag.name, **options)


def help_block(command: str) -> str:
    """``command``'s flags as the block printed after the release's own help (prepare_data)."""
    lines = ["", BLOCK_TITLE]
    for flag in of_command(command):
        head = f"{flag.name} {flag.metavar}" if flag.metavar else flag.name
        first, *rest = flag.help.split("\n")
        lines.append(f"  {head:<{_BLOCK_HEAD}}  {first}")
        lines += [" " * (_BLOCK_HEAD + 4) + line for line in rest]
    return "\n".join(lines) + "\n"


def typer_parameter(flag: Flag) -> tuple[Any, Any]:
    """(annotation, default) that make ``flag`` a keyword parameter of a typer command."""
    from typing import Annotated

    import typer

    option = typer.Option(flag.name, help=flag.help, min=flag.minimum)
    return Annotated[flag.type, option], flag.default
