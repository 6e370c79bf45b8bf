"""Fix: a regenerate-responses run survives one bad request, keeps earlier output, ends saying so.

Targets: ``_run`` (0.8+; the run is regenerate/run.py), ``_post_chat`` (``--request-timeout``)
and ``_worker`` (rows through regenerate/output.py's writers), plus our options on upstream's
command (docs/regenerate-responses.md; docs/upstream.md, "Regenerate responses").
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import typing
from typing import Any

from speculators_qwen_compat.cli import flags
from speculators_qwen_compat.core.fix import Fix, Patcher
from speculators_qwen_compat.core.targets import ANY, ReleaseRange, Resolved, Shape, Target
from speculators_qwen_compat.core.upstream import CLI_REGENERATE
from speculators_qwen_compat.regenerate import state as regen_state
from speculators_qwen_compat.regenerate.run import guarded_run

RUN = Target(
    CLI_REGENERATE,
    "_run",
    params=("endpoint", "model", "dataset_name", "outfile", "resume", "max_tokens", "limit"),
)
LOAD_SEEN = Target(CLI_REGENERATE, "load_seen", params=("path",))
DETECT_MODEL = Target(CLI_REGENERATE, "detect_model", params=("endpoint",))
SANITIZE = Target(CLI_REGENERATE, "sanitize_filename", params=("name",))
COMMAND = Target(CLI_REGENERATE, "regenerate_responses", params=("max_tokens",))
RETRIES = Target(CLI_REGENERATE, "with_retries", params=("fn",))
WORKER = Target(CLI_REGENERATE, "_worker", params=("out_fh", "err_fh"))
POST_CHAT = Target(CLI_REGENERATE, "_post_chat", params=("session", "endpoint", "payload"))
PRESETS = Target(CLI_REGENERATE, "DATASET_CONFIGS", kind=ANY, optional=True)
MAX_TOKENS_HELP = (
    "max_tokens of each request (the reply's length); speculators also stops a conversation "
    "once a request's prompt + reply exceed it, so it caps prompt + completion too (counted "
    "as cut short; a conversation whose first prompt alone reaches it is warned about)"
)


class RegenRunFix(Fix):
    name = "regen_run"
    summary = (
        "regenerate-responses: one writer, resume keeps earlier rows, a request's fault is not "
        "the run's, every conversation counted"
    )
    modules = (CLI_REGENERATE,)
    shapes = (
        Shape(
            "_run staged, guarded and counted",
            (RUN, LOAD_SEEN, DETECT_MODEL, SANITIZE, COMMAND, RETRIES, POST_CHAT, WORKER, PRESETS),
        ),
    )
    applies_on = ReleaseRange("0.8.1", "0.9.0")

    def apply(self, found: Resolved, patcher: Patcher) -> None:
        module = found.module

        def run(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            return guarded_run(wrapped, args, kwargs, module)

        patcher.wrap(*found.owner_and_name(RUN), run)
        patcher.wrap(*found.owner_and_name(WORKER), with_row_writer)
        command = found.get(COMMAND)
        option = _max_tokens_option(command)
        if option is not None:
            patcher.replace(option, "help", MAX_TOKENS_HELP)
        patcher.replace(module, "regenerate_responses", with_run_options(command))
        post_chat = found.get(POST_CHAT)
        inner = getattr(post_chat, "__wrapped__", None)
        if inner is not None:
            patcher.replace(module, "_post_chat", found.get(RETRIES)(timed(inner)))


def with_row_writer(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """Upstream's ``_worker`` writing the rows through the run's RowWriter (``out_fh``) and
    its failures through its ErrorsWriter (``err_fh``)."""
    state = regen_state.current()
    if state is not None and state.writer is not None and "out_fh" in kwargs:
        kwargs = {**kwargs, "out_fh": state.writer}
    if state is not None and state.errors_writer is not None and "err_fh" in kwargs:
        kwargs = {**kwargs, "err_fh": state.errors_writer}
    return wrapped(*args, **kwargs)


def timed(post_chat: Any) -> Any:
    """One try of upstream's ``_post_chat`` bounded by ``--request-timeout`` (its retries
    around it are upstream's)."""

    @functools.wraps(post_chat)
    async def one_try(*args: Any, **kwargs: Any) -> Any:
        timeout = regen_state.SETTINGS.request_timeout
        if regen_state.current() is None or not timeout:
            return await post_chat(*args, **kwargs)
        async with asyncio.timeout(timeout):  # a deadline on this task: no task per try
            return await post_chat(*args, **kwargs)

    return one_try


def with_run_options(command: Any) -> Any:
    """Upstream's typer command with our flags (cli/flags.py ``REGENERATE``) added to its
    signature (typer reads both ``__signature__`` and the annotations); their values go to
    ``regen_state.SETTINGS``."""
    added = {flag.dest: flags.typer_parameter(flag) for flag in flags.of_command(flags.REGENERATE)}
    signature = inspect.signature(command)

    @functools.wraps(command)
    def regenerate_responses(*args: Any, **kwargs: Any) -> Any:
        for flag in flags.of_command(flags.REGENERATE):
            value = flag.type(kwargs.pop(flag.dest, flag.default))
            setattr(regen_state.SETTINGS, flag.dest, value)
        return command(*args, **kwargs)

    parameters = list(signature.parameters.values())
    for name, (annotation, default) in added.items():
        parameters.append(
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default
            )
        )
    regenerate_responses.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    regenerate_responses.__annotations__ = {
        **typing.get_type_hints(command, include_extras=True),
        **{name: annotation for name, (annotation, _) in added.items()},
    }
    return regenerate_responses


def _max_tokens_option(command: Any) -> Any:
    """The typer OptionInfo of ``max_tokens`` (its ``Annotated`` metadata), or None."""
    with contextlib.suppress(Exception):
        hint = typing.get_type_hints(command, include_extras=True).get("max_tokens")
        for meta in getattr(hint, "__metadata__", ()):
            if hasattr(meta, "help"):
                return meta
    return None
