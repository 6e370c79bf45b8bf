"""``python -m speculators_qwen_compat.prepare_data``: the installed release's prepare_data, fixed.

The release's own flags (0.8+'s typer command; <= 0.7: release_script.py) plus ours (cli/flags.py).
Writes ``compat_report.json`` beside upstream's output, put in place only when the run succeeded
(staged_output.py); a fatal problem is one line ``speculators_qwen_compat: error: ...``, exit 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from speculators_qwen_compat import status
from speculators_qwen_compat.cli import fatal_stage, flags, frozen_imports
from speculators_qwen_compat.cli.deferred_compile import compile_on_first_call
from speculators_qwen_compat.cli.staged_output import StagedOutput, stage
from speculators_qwen_compat.cli.support import (
    DEBUG_ENV,
    PACKAGE_LOGGER,
    UPSTREAM_LOGGER,
    activate,
    data_options,
    debug_requested,
    has_module,
    import_preprocessing,
    log_to_stderr,
    run_main,
)
from speculators_qwen_compat.cli.worker_sockets import check_temp_folder
from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.core.upstream import CLI_PREPARE_DATA
from speculators_qwen_compat.data.account.ledger import REPORT_NAME
from speculators_qwen_compat.data.account.run import fixed_run
from speculators_qwen_compat.data.normalize import inline_media
from speculators_qwen_compat.data.render import endpoint, media

if TYPE_CHECKING:
    from speculators_qwen_compat.core.run import Run

PROG = "python -m speculators_qwen_compat.prepare_data"
RENDER_ENDPOINT_HELP = (
    "'local' (the default when the flag is omitted: render in this process with the target's "
    "tokenizer and, for image parts, its image processor, token-identical to vLLM's /render; "
    "no server needed), or the base URL of a vLLM server serving the target (e.g. "
    "http://localhost:8000), which then renders every conversation"
)

log = logging.getLogger("speculators_qwen_compat")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    ours, rest = _our_options(args)
    if ours.debug:  # also read where a run fails on non-data errors (data/account/run.py)
        os.environ[DEBUG_ENV] = "1"
    return run_main(
        lambda: _prepare(ours, rest),
        debug_requested(ours.debug),
        explain=fatal_stage.explain,
        epilogue=lambda: inline_media.kept_note(_output(rest)),
    )


def _our_options(args: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """Our flags (cli/flags.py) out of ``args``; the rest is the release's."""
    parser = argparse.ArgumentParser(add_help=False)
    flags.add_arguments(parser, flags.PREPARE_DATA)
    return parser.parse_known_args(args)


def _prepare(ours: argparse.Namespace, rest: list[str]) -> int:
    log_to_stderr(PACKAGE_LOGGER)  # our lines; upstream's 0.8+ command configures its own
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # the run's options, fixed here once for this process and its map workers
    options = data_options(ours)
    # inline images (Image() bytes, data: URIs) are written beside --output (inline_media.py)
    folder = inline_media.choose_folder(_output(rest))
    media_before = inline_media.images_in(folder)  # an earlier run's, reused by this one
    options.update(inline_media_dir=str(folder), strict_data=ours.strict_data)
    if ours.render_retry_seconds is not None:  # else as inherited (a parent's, or the default)
        options["render_retry_seconds"] = _seconds(ours.render_retry_seconds)
    activate()
    with fixed_run(announce=False, **options) as run:  # the summary is our last line
        return _prepare_reported(rest, run, media_before)


def _output(rest: list[str]) -> Path:
    """The run's --output (upstream's default when not given)."""
    return Path(_option_value(rest, "--output", "./output"))


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise CompatError(f"--render-retry-seconds {text}: give a number of seconds, 0 or more")
    return seconds


def _prepare_reported(rest: list[str], run: Run, media_before: frozenset[str]) -> int:
    """The run (core/run.py), then its output committed with compat_report.json and the last
    line."""
    wants_help = "-h" in rest or "--help" in rest
    if not wants_help:
        check_temp_folder()
    with frozen_imports.importing(), compile_on_first_call():
        typer_command = has_module(CLI_PREPARE_DATA)  # imports speculators: most of the start-up
    if typer_command:
        code, staged = _run_typer_command(rest, wants_help, run)
    else:
        if media.processor_kwargs() and not wants_help:
            raise CompatError(
                "--mm-processor-kwargs applies to speculators 0.8+ (rendering through vLLM's "
                "request handling); on this release the target's processor counts images with "
                "its preprocessor_config.json: put the server's max_pixels there"
            )
        from speculators_qwen_compat.cli import release_script

        log_to_stderr(UPSTREAM_LOGGER)  # the git-only script we stand in for showed its lines
        with frozen_imports.importing(), compile_on_first_call():
            preprocessing = import_preprocessing()
        if wants_help:
            release_script.build_parser(preprocessing, PROG).print_help()
            print(flags.help_block(flags.PREPARE_DATA))
            return 0
        code, staged = release_script.run(preprocessing, rest, PROG)
    outcome = run.outcome
    if outcome is not None:
        for name, used in sorted(outcome.tally.quality.files.items()):
            log.info("%s: conversations from %s", name, _columns_used(used.columns))
    if staged is None:
        return code
    try:
        if code != 0 or outcome is None:
            staged.abandon()
            return code
        write_report(staged.folder, outcome, media_before)
        output = staged.commit()
    finally:
        staged.abandon()  # a no-op once committed
    media_words = _media_words(media_before)
    print(f"wrote {outcome.rows_out} rows to {output}; {outcome.tally.summary()}{media_words}")
    return code


def _media_files(before: frozenset[str]) -> tuple[Path, int, int] | None:
    """The media folder of this run, the images in it and how many of them this run wrote
    (the rest an earlier run with the same --output wrote), when it holds any."""
    folder = inline_media.media_folder()
    images = inline_media.images_in(folder)
    if folder is None or not images:
        return None
    return folder, len(images), len(images - before)


def _media_words(before: frozenset[str]) -> str:
    found = _media_files(before)
    if found is None:
        return ""
    folder, count, written = found
    return (
        f"; inline images in {folder} ({count} files, {written} written by this run: serve "
        "with --allowed-local-media-path)"
    )


def _run_typer_command(
    rest: list[str], wants_help: bool, run: Run
) -> tuple[int, StagedOutput | None]:
    from speculators.cli import app

    if wants_help:
        # Rich cuts long flag names to fit 80 columns when output is not a terminal.
        os.environ.setdefault("COLUMNS", "140")
        command = _prepare_data_command(app)
        for param in command.params:  # upstream's text says a server is required: not here
            if param.name == "render_endpoint":
                param.help = RENDER_ENDPOINT_HELP
        command.main(args=["--help"], prog_name=PROG, standalone_mode=False)
        print(flags.help_block(flags.PREPARE_DATA))
        return 0, None
    if not any(a == "--render-endpoint" or a.startswith("--render-endpoint=") for a in rest):
        log.info(
            "no --render-endpoint given: rendering locally with the target's tokenizer "
            "(pass --render-endpoint URL to use a vLLM server)"
        )
        rest = [*rest, "--render-endpoint", "local"]
    # refused before the data is read (the route refuses it too, for a user's script)
    endpoint.refuse_workers_form(_option_value(rest, "--render-endpoint", ""))
    freq = _option_value(rest, "--token-freq-path", "")
    output = _output(rest)
    staged = stage(output, "--overwrite" in rest, Path(freq) if freq else None)
    if staged is not None:
        rest = [a for a in _without_option(rest, "--output") if a != "--overwrite"]
        rest += ["--output", str(staged.folder)]
        if freq:
            rest = [*_without_option(rest, "--token-freq-path"), "--token-freq-path"]
            rest.append(str(staged.inside(Path(freq))))
    try:
        code = _prepare_data_command(app).main(args=rest, prog_name=PROG, standalone_mode=False)
    except BaseException as exc:
        if staged is not None:
            staged.abandon()
        if _usage_error(exc):  # the user's command line, not a bug: no traceback to send
            words = exc.format_message()  # type: ignore[attr-defined]
            raise CompatError(
                f"{words}: check the command against `{PROG} --help` (a flag that takes "
                "several values is given once per value, e.g. --data A --data B)"
            ) from None
        raise
    if run.outcome is None and staged is not None:  # upstream stopped before the run
        staged.abandon()
        staged = None
    return int(code or 0), staged


def _usage_error(exc: BaseException) -> bool:
    """Whether ``exc`` is click's UsageError (typer's own copy of click on newer typer)."""
    return any(
        cls.__name__ == "UsageError" and cls.__module__.endswith("click.exceptions")
        for cls in type(exc).__mro__
    )


def _without_option(args: list[str], flag: str) -> list[str]:
    """``args`` without ``flag VALUE`` / ``flag=VALUE``."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg == flag:
            skip = True
            continue
        if arg.startswith(flag + "="):
            continue
        out.append(arg)
    return out


def _prepare_data_command(app: Any) -> Any:
    import typer

    return typer.main.get_command(app).commands["prepare-data"]


def _option_value(args: list[str], flag: str, default: str) -> str:
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return default


def _columns_used(columns: Any) -> str:
    return ", ".join(f"column {name!r} ({n} rows)" for name, n in columns.most_common())


def write_report(output: Path, outcome: Any, media_before: frozenset[str]) -> Path:
    """compat_report.json: what was read, kept and skipped (with examples), and the fixes."""
    from importlib.metadata import version

    tally = outcome.tally
    report = {
        "speculators": version("speculators"),
        "conversations_in": tally.conversations_in,
        "conversations_kept": tally.kept,
        "errors": tally.errors,
        "rows_out": outcome.rows_out,
        "skipped": dict(tally.skipped.most_common()),
        "skipped_examples": tally.examples,
        "notes": dict(tally.notes.most_common()),
        "data": tally.reads,
        "warnings": tally.warnings(),
        "columns": {
            name: dict(stats.columns.most_common())
            for name, stats in sorted(tally.quality.files.items())
        },
        "fixes": [vars(s) for s in status()],
    }
    media_files = _media_files(media_before)
    if media_files is not None:
        report["media_folder"] = str(media_files[0])
        report["media_files"], report["media_files_written"] = media_files[1:]
    path = output / REPORT_NAME
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    sys.exit(main())
