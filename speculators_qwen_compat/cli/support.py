"""What every entry point shares: fixes on for this process and its children, and our own fatal
errors as one line ``speculators_qwen_compat: error: ...`` (the traceback only when asked for).
``run`` and ``train`` execute the user's script or upstream's trainer, whose exceptions are not
ours to summarise: they propagate as Python shows them; only a ``CompatError`` is one line.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import os
import sys
import traceback
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from speculators_qwen_compat import install
from speculators_qwen_compat.core.errors import DEBUG_ENV, CompatError, reason_of
from speculators_qwen_compat.core.registry import registry
from speculators_qwen_compat.core.startup import ENV_SWITCH, switch_value, switched_off_by_env
from speculators_qwen_compat.core.upstream import PREPROCESSING

if TYPE_CHECKING:
    pass

#: Every log line of ours is under this logger; nothing of ours configures the root logger.
PACKAGE_LOGGER = "speculators_qwen_compat"
UPSTREAM_LOGGER = "speculators"
LOG_FORMAT = "%(asctime)s - %(name)s - %(levelname)s - %(message)s"
ERROR_PREFIX = "speculators_qwen_compat: error: "
#: How to get the traceback, for entry points that parse ``--debug`` (prepare_data, doctor).
DEBUG_FLAG_HINT = "rerun with --debug for the traceback"
#: How to get the traceback where the arguments belong to someone else (run, train).
DEBUG_ENV_HINT = f"set {DEBUG_ENV}=1 for the traceback"


def activate() -> None:
    """Install the fixes here and make every child interpreter (spawned ``datasets.map``
    workers, torchrun ranks) activate them through the .pth, even where the venv-wide switch
    was ``0``: an explicit entry point means the fixes are wanted."""
    _, disabled = switched_off_by_env()
    install(disabled)
    os.environ[ENV_SWITCH] = switch_value(registry().disabled)


def data_options(given: argparse.Namespace) -> dict[str, Any]:
    """The data flags prepare_data and doctor share (cli/flags.py: the conversation column, the
    flat-column mapping, --unknown-roles, --mm-processor-kwargs, --media-dir), checked, as the
    run's options hold them (``fixed_run``). Imported here: run and train never need them."""
    from speculators_qwen_compat.cli import flags
    from speculators_qwen_compat.data.normalize.media_paths import root_of
    from speculators_qwen_compat.data.normalize.normalize import checked_unknown_roles
    from speculators_qwen_compat.data.read.columns import ColumnOptions
    from speculators_qwen_compat.data.render.media import processor_kwargs_of

    def value(flag: flags.Flag) -> Any:
        return getattr(given, flag.dest, None)

    columns = ColumnOptions.from_flags(
        value(flags.CONVERSATIONS_KEY),
        value(flags.PROMPT_COLUMN),
        value(flags.RESPONSE_COLUMN),
        value(flags.SYSTEM_COLUMN),
    )
    options = columns.as_options()
    unknown_roles = value(flags.UNKNOWN_ROLES)
    if unknown_roles is not None:  # else as inherited (a parent's, or the release's)
        options["unknown_roles"] = checked_unknown_roles(unknown_roles)
    options["mm_processor_kwargs"] = processor_kwargs_of(value(flags.MM_PROCESSOR_KWARGS))
    options["media_root"] = root_of(value(flags.MEDIA_DIR))
    return options


def log_to_stderr(name: str) -> None:
    """Show INFO lines of logger ``name`` on stderr, once (idempotent), without touching the
    root logger: the lines do not propagate, so a root handler configured by upstream or the
    user does not print them a second time."""
    logger = logging.getLogger(name)
    if not any(getattr(h, "_speculators_qwen_compat", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        handler._speculators_qwen_compat = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def debug_requested(flag: bool = False) -> bool:
    return flag or os.environ.get(DEBUG_ENV, "") not in ("", "0")


def run_main(
    body: Callable[[], int],
    debug: bool,
    hint: str = DEBUG_FLAG_HINT,
    ours_only: bool = False,
    explain: Callable[[BaseException, str], str] | None = None,
    epilogue: Callable[[], str] | None = None,
) -> int:
    """Run an entry point's body; a fatal error becomes one line on stderr and exit 1.

    With ``ours_only`` (run, train) only a ``CompatError`` is turned into one line: anything
    else comes from the user's or upstream's code and propagates untouched. ``explain``: a
    library's error with what it means for this command (prepare_data: cli/fatal_stage.py).
    ``epilogue``: what the failed run leaves behind, added to the line (empty: nothing)."""
    try:
        return body()
    except CompatError as exc:
        if debug:
            traceback.print_exc()
        message = _with_epilogue(fatal_message(exc, debug, hint), epilogue)
        print(f"{ERROR_PREFIX}{message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        if ours_only:
            raise
        print(f"{ERROR_PREFIX}interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if ours_only:
            raise
        if debug:
            traceback.print_exc()
        message = fatal_message(exc, debug, hint)
        if explain is not None:
            explained = explain(exc, f"{type(exc).__name__}: {reason_of(exc, limit=600)}")
            message = explained if debug else f"{explained} ({hint})"
        print(f"{ERROR_PREFIX}{_with_epilogue(message, epilogue)}", file=sys.stderr)
        return 1


def _with_epilogue(message: str, epilogue: Callable[[], str] | None) -> str:
    try:
        tail = epilogue() if epilogue is not None else ""
    except Exception:  # the line must still be said
        tail = ""
    return f"{message}; {tail}" if tail else message


def fatal_message(exc: BaseException, debug: bool, hint: str = DEBUG_FLAG_HINT) -> str:
    if isinstance(exc, CompatError):
        return reason_of(exc, limit=2000)
    suffix = "" if debug else f" ({hint})"
    return f"{type(exc).__name__}: {reason_of(exc, limit=600)}{suffix}"


def has_module(name: str) -> bool:
    """Whether ``name`` can be imported (its parent packages are imported to find out)."""
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False


def import_preprocessing() -> ModuleType:
    """Upstream's preprocessing module, or a CompatError saying why it cannot be imported."""
    if not has_module("speculators"):
        raise CompatError(
            f"speculators is not installed in this Python ({sys.executable}); "
            "install it first (pip install speculators)"
        )
    try:
        return importlib.import_module(PREPROCESSING)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "vllm":
            raise CompatError(
                "this speculators release imports vLLM in its data_generation package "
                "(0.3/0.4); install vllm, or use speculators 0.5 or newer"
            ) from exc
        raise
