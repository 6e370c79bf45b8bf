"""Fix: a regenerate-responses run survives one bad request, never loses an earlier output, and
ends with what it did.

Target: ``speculators.cli.regenerate_responses._run`` (0.8.1 :690, 0.9.0 :690; docs/upstream.md
"Regenerate responses"), the coroutine the typer command ``regenerate_responses`` runs, and
``_post_chat`` (:286, upstream's retries around it). Upstream exits 0 whatever happened, appends
to ``--outfile``, has no read timeout (``sock_read=None``) and its ``--max-tokens`` help does not
say it caps prompt + completion. Here (docs/regenerate-responses.md; code in
speculators_qwen_compat/regenerate/):

- the files: regenerate/output.py (partial file, one writer's lock, torn last line, resume
  that never rewrites or deletes an earlier output, the final rename);
- ``--request-timeout SECONDS`` bounds each try of ``_post_chat`` (upstream retries it) and
  ``--max-consecutive-failures N`` stops a run whose requests all fail (regenerate/loop.py,
  state.py): two options added to upstream's typer command, shown in its ``--help``;
- a server fault, the consecutive-failure limit or more than ERROR_LIMIT bugs cancel every
  worker at once: one line saying what was done, where the rows are and how to resume, exit 1;
- every conversation counted once (regenerate/tally.py): the line ``regenerated N of M
  conversations (R rows); cut short ...; skipped ...; failed ...`` and ``NAME.report.json``,
  written last, agreeing with the exit code and the files.
Shape needed: ``_run`` taking ``endpoint``, ``model``, ``dataset_name``, ``outfile``, ``resume``,
``max_tokens``, ``limit``; ``load_seen``, ``detect_model``, ``sanitize_filename``,
``with_retries``, ``_post_chat`` (a ``with_retries`` wrapper with ``__wrapped__``);
``regenerate_responses`` with a ``max_tokens`` option.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import json
import os
import sys
import typing
from pathlib import Path
from typing import Annotated, Any

from speculators_qwen_compat.core.errors import DEBUG_ENV, CompatError
from speculators_qwen_compat.core.fix import Fix, Patcher
from speculators_qwen_compat.core.targets import ANY, Found, Shape, Span, Target
from speculators_qwen_compat.core.upstream import CLI_REGENERATE, bind, call
from speculators_qwen_compat.regenerate import output as files
from speculators_qwen_compat.regenerate import state as regen_state
from speculators_qwen_compat.regenerate.tally import RegenTally, write_report

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
POST_CHAT = Target(CLI_REGENERATE, "_post_chat", params=("session", "endpoint", "payload"))
PRESETS = Target(CLI_REGENERATE, "DATASET_CONFIGS", kind=ANY, optional=True)
ERROR_PREFIX = "speculators_qwen_compat: error: "
MAX_TOKENS_HELP = (
    "max_tokens of each request (the reply's length); speculators also stops a conversation "
    "once a request's prompt + reply exceed it, so it caps prompt + completion too (counted "
    "as cut short; a conversation whose first prompt alone reaches it is warned about)"
)
TIMEOUT_HELP = (
    "Seconds one try of one request may take before it is retried (--max-retries); after the "
    "last try the server is asked whether it is alive: alive, the conversation is counted "
    "failed and the run goes on"
)
CONSECUTIVE_HELP = (
    "Stop the run (exit 1, resumable) when this many conversations in a row failed while the "
    "server answered /v1/models (0: never)"
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
            (RUN, LOAD_SEEN, DETECT_MODEL, SANITIZE, COMMAND, RETRIES, POST_CHAT, PRESETS),
        ),
    )
    applies_on = Span("0.8.1", "0.9.0")

    def apply(self, found: Found, patcher: Patcher) -> None:
        module = found.module

        def run(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            return _guarded_run(wrapped, args, kwargs, module)

        patcher.wrap(*found.place(RUN), run)
        command = found.get(COMMAND)
        option = _max_tokens_option(command)
        if option is not None:
            patcher.replace(option, "help", MAX_TOKENS_HELP)
        patcher.replace(module, "regenerate_responses", with_run_options(command))
        post_chat = found.get(POST_CHAT)
        inner = getattr(post_chat, "__wrapped__", None)
        if inner is not None:
            patcher.replace(module, "_post_chat", found.get(RETRIES)(timed(inner)))


def timed(post_chat: Any) -> Any:
    """One try of upstream's ``_post_chat`` bounded by ``--request-timeout`` (its retries
    around it are upstream's)."""

    @functools.wraps(post_chat)
    async def one_try(*args: Any, **kwargs: Any) -> Any:
        timeout = regen_state.SETTINGS.request_timeout
        if regen_state.current() is None or not timeout:
            return await post_chat(*args, **kwargs)
        return await asyncio.wait_for(post_chat(*args, **kwargs), timeout)

    return one_try


def with_run_options(command: Any) -> Any:
    """Upstream's typer command with ``--request-timeout`` and ``--max-consecutive-failures``
    added to its signature (typer reads both ``__signature__`` and the annotations)."""
    import typer

    signature = inspect.signature(command)
    added = {
        "request_timeout": (
            Annotated[float, typer.Option(help=TIMEOUT_HELP, min=1.0)],
            regen_state.DEFAULT_REQUEST_TIMEOUT,
        ),
        "max_consecutive_failures": (
            Annotated[int, typer.Option(help=CONSECUTIVE_HELP, min=0)],
            regen_state.DEFAULT_MAX_CONSECUTIVE,
        ),
    }

    @functools.wraps(command)
    def regenerate_responses(*args: Any, **kwargs: Any) -> Any:
        regen_state.SETTINGS.request_timeout = float(
            kwargs.pop("request_timeout", regen_state.DEFAULT_REQUEST_TIMEOUT)
        )
        regen_state.SETTINGS.max_consecutive_failures = int(
            kwargs.pop("max_consecutive_failures", regen_state.DEFAULT_MAX_CONSECUTIVE)
        )
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


async def _guarded_run(wrapped: Any, args: tuple, kwargs: dict, module: Any) -> None:
    if regen_state.current() is not None:  # nested: the outer run counts
        return await wrapped(*args, **kwargs)
    try:
        await _run(wrapped, args, kwargs, module)
    except CompatError as exc:
        print(f"{ERROR_PREFIX}{exc}", file=sys.stderr, flush=True)
        raise SystemExit(1) from exc


async def _run(wrapped: Any, args: tuple, kwargs: dict, module: Any) -> None:
    bound = bind(wrapped, args, kwargs)
    arguments = bound.arguments
    endpoint = arguments["endpoint"]
    if arguments["model"] is None:
        try:
            arguments["model"] = await module.detect_model(endpoint)
        except ValueError as exc:
            raise CompatError(
                f"no vLLM server answered at {endpoint} ({' '.join(str(exc).split())[:300]}); "
                "nothing was done: start the server or fix --endpoint"
            ) from exc
    final = Path(arguments["outfile"] or _default_outfile(module, arguments))
    output = files.take(final, bool(arguments["resume"]))
    try:
        await _locked_run(wrapped, bound, module, output)
    finally:
        output.release()


async def _locked_run(wrapped: Any, bound: Any, module: Any, output: files.Output) -> None:
    arguments = bound.arguments
    endpoint = arguments["endpoint"]
    arguments["outfile"] = str(output.partial)
    state = regen_state.open_run()
    state.max_tokens = arguments["max_tokens"]
    state.endpoint = endpoint
    tally = state.tally
    tally.torn_rows = output.torn
    if arguments["resume"]:
        state.seen = module.load_seen(str(output.partial))
    task = asyncio.ensure_future(call(wrapped, bound))
    waiter = asyncio.ensure_future(state.wake.wait())
    failure: BaseException | None = None
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():  # a fault or a limit: stop every worker now
            await _cancel_all(task)
        else:
            failure = task.exception()
    finally:
        waiter.cancel()
        regen_state.close_run()
    if failure is not None or state.stop is not None:
        tally.conversations_in = max(
            tally.conversations_in, _rows_in(arguments["dataset_name"], arguments["limit"])
        )
        tally.not_reached = max(0, tally.conversations_in - tally.counted())
    if failure is not None:
        _end(output, tally, complete=False, code=1, rows_at=_stopped_files(output))
        raise failure
    if state.stop is not None:
        rows_at = _stopped_files(output)
        message = _stopped(state, endpoint, output, rows_at)
        _end(output, tally, complete=False, code=1, rows_at=rows_at)
        raise CompatError(message)
    _finish(output, tally)


def _finish(output: files.Output, tally: RegenTally) -> None:
    """The run read every conversation: publish, or leave an earlier output as it was."""
    final = output.final
    failed = sum(tally.failed.values())
    if output.added() or (output.earlier and not output.from_final and not failed):
        files.publish(output)
        _end(output, tally, complete=True, code=0, rows_at=final)
        print(f"{tally.summary()}; wrote {final}", flush=True)
        return
    where = files.restore(output)
    errors = files.errors_path(where or output.partial)
    noted = f"; each failure is in {errors}" if errors.exists() and errors.stat().st_size else ""
    if where is None:
        _end(output, tally, complete=True, code=1, rows_at=None)
        raise CompatError(
            f"no conversation was regenerated ({tally.summary()}); nothing was written to "
            f"{final}{noted}"
        )
    if failed:
        _end(output, tally, complete=True, code=1, rows_at=where)
        raise CompatError(
            f"nothing new was regenerated ({tally.summary()}); the earlier rows in {where} are "
            f"as they were{noted}"
        )
    _end(output, tally, complete=True, code=0, rows_at=where)
    print(f"{tally.summary()}; nothing new: {where} is as it was", flush=True)


def _stopped_files(output: files.Output) -> Path | None:
    """A stopped run: its rows stay in the partial file; with none added, an earlier output is
    put back as it was."""
    if output.added():
        return output.partial
    return files.restore(output)


def _end(
    output: files.Output, tally: RegenTally, *, complete: bool, code: int, rows_at: Path | None
) -> None:
    """The report, the run's last write: what was counted, the exit code, where the rows are."""
    errors = [
        str(p)
        for p in (files.errors_path(output.final), files.errors_path(output.partial))
        if p.exists() and p.stat().st_size
    ]
    write_report(
        output.final, tally, complete=complete, exit_code=code,
        output=str(rows_at) if rows_at else None, errors_file=errors[0] if errors else None,
    )  # fmt: skip


def _rows_in(dataset: str, limit: int | None) -> int:
    """Conversations in a local ``--dataset`` file (at most ``--limit``), for ``not_reached``;
    0 for a preset (not read again)."""
    path = Path(str(dataset))
    count = 0
    with contextlib.suppress(OSError, ValueError):
        if path.suffix.lower() == ".jsonl":
            with path.open(encoding="utf-8") as file:
                count = sum(1 for line in file if line.strip())
        elif path.suffix.lower() == ".json":
            value = json.loads(path.read_text(encoding="utf-8"))
            count = len(value) if isinstance(value, list) else 1
    return min(count, limit) if limit is not None else count


async def _cancel_all(task: asyncio.Task) -> None:
    """Cancel upstream's run and every worker it started (they are not its children: a cancelled
    ``queue.put`` would leave them running)."""
    me = asyncio.current_task()
    for other in asyncio.all_tasks():
        if other is not me:
            other.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _stopped(
    state: regen_state.RunState, endpoint: str, output: files.Output, rows_at: Path | None
) -> str:
    tally = state.tally
    if state.first_trace and os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        sys.stderr.write(state.first_trace)
    head = state.stop or ""
    if state.server_fault:
        head = f"the vLLM server at {endpoint} failed: {head}"
    if rows_at is None:
        return f"{head}; no row was written; {tally.summary()}; fix it and rerun the same command"
    if rows_at == output.final:
        return (
            f"{head}; nothing was added, {output.final} is as it was; {tally.summary()}; fix it "
            "and rerun the same command"
        )
    return (
        f"{head}; the rows are in {output.partial} (partial); {tally.summary()}; fix it and "
        f"rerun the same command with --resume to finish into {output.final}"
    )


def _default_outfile(module: Any, arguments: dict[str, Any]) -> str:
    """Upstream's name for an omitted --outfile (0.9.0 :731, computed inline in ``_run``, no
    function to call): SOURCE_MODEL.jsonl through upstream's ``sanitize_filename``."""
    model = str(arguments["model"])
    dataset = str(arguments["dataset_name"])
    presets = getattr(module, "DATASET_CONFIGS", {}) or {}
    source = presets[dataset].name if dataset in presets else Path(dataset).stem
    model_short = model.split("/")[-1] if "/" in model else model
    return f"{module.sanitize_filename(source)}_{module.sanitize_filename(model_short)}.jsonl"
