"""Fix: a regenerate-responses run ends with what it did, fails loudly on faults and never appends.

Target: ``speculators.cli.regenerate_responses._run`` (0.8.1 :690, 0.9.0 :690; docs/upstream.md
"Regenerate responses"), the coroutine ``regenerate_responses`` runs. Upstream exits 0 whatever
happened (every conversation in the errors file, or no server at all), opens ``--outfile`` for
appending (a rerun without ``--resume`` duplicates every row) and its ``--max-tokens`` help does
not say that it also caps prompt + completion. Here:

- an existing ``--outfile`` without ``--resume`` is refused with one line, before anything;
- upstream writes ``NAME.partial.jsonl`` (errors: ``NAME.partial.errors.jsonl``), renamed to
  ``--outfile`` when the run ends; ``--resume`` continues a partial file (or a finished one);
- a server fault (regen_loop.py) or more than ERROR_LIMIT conversations failing with a bug
  cancel every worker at once: one line saying what was done, where the partial output is and
  how to resume, exit 1;
- the run ends with ``regenerated N of M conversations (R rows); cut short ...; skipped ...;
  failed ...`` and ``NAME.report.json`` beside ``--outfile``; a run that wrote no row fails;
- ``--help`` says what ``--max-tokens`` caps (the typer option's help text, ``regenerate_
  responses``'s ``max_tokens`` annotation).
Shape needed: ``_run`` taking ``endpoint``, ``model``, ``dataset_name``, ``outfile``, ``resume``,
``max_tokens``; ``load_seen``, ``detect_model``, ``sanitize_filename``; ``regenerate_responses``
with a ``max_tokens`` option.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import typing
from pathlib import Path
from typing import Any

from speculators_qwen_compat.core.errors import DEBUG_ENV, CompatError
from speculators_qwen_compat.core.fix import Fix, Patcher
from speculators_qwen_compat.core.targets import ANY, Found, Shape, Span, Target
from speculators_qwen_compat.core.upstream import CLI_REGENERATE, bind, call
from speculators_qwen_compat.data import regen_state
from speculators_qwen_compat.data.regen_tally import RegenTally, write_report

RUN = Target(
    CLI_REGENERATE,
    "_run",
    params=("endpoint", "model", "dataset_name", "outfile", "resume", "max_tokens"),
)
LOAD_SEEN = Target(CLI_REGENERATE, "load_seen", params=("path",))
DETECT_MODEL = Target(CLI_REGENERATE, "detect_model", params=("endpoint",))
SANITIZE = Target(CLI_REGENERATE, "sanitize_filename", params=("name",))
COMMAND = Target(CLI_REGENERATE, "regenerate_responses", params=("max_tokens",))
PRESETS = Target(CLI_REGENERATE, "DATASET_CONFIGS", kind=ANY, optional=True)
ERROR_PREFIX = "speculators_qwen_compat: error: "
MAX_TOKENS_HELP = (
    "max_tokens of each request (the reply's length); speculators also stops a conversation "
    "once a request's prompt + reply exceed it, so it caps prompt + completion too (counted "
    "as cut short; a conversation whose first prompt alone reaches it is warned about)"
)


class RegenRunFix(Fix):
    name = "regen_run"
    summary = "regenerate-responses: refuse appends, fail on server faults, summary and report"
    modules = (CLI_REGENERATE,)
    shapes = (
        Shape(
            "_run staged, guarded and counted",
            (RUN, LOAD_SEEN, DETECT_MODEL, SANITIZE, COMMAND, PRESETS),
        ),
    )
    applies_on = Span("0.8.1", "0.9.0")

    def apply(self, found: Found, patcher: Patcher) -> None:
        module = found.module

        def run(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
            return _guarded_run(wrapped, args, kwargs, module)

        patcher.wrap(*found.place(RUN), run)
        option = _max_tokens_option(found.get(COMMAND))
        if option is not None:
            patcher.replace(option, "help", MAX_TOKENS_HELP)


def _max_tokens_option(command: Any) -> Any:
    """The typer OptionInfo of ``max_tokens`` (its ``Annotated`` metadata), or None."""
    with contextlib.suppress(Exception):
        hint = typing.get_type_hints(command, include_extras=True).get("max_tokens")
        for meta in getattr(hint, "__metadata__", ()):
            if hasattr(meta, "help"):
                return meta
    return None


def partial_path(outfile: Path) -> Path:
    """Where upstream writes until the run ends: ``out.jsonl`` -> ``out.partial.jsonl``."""
    return outfile.with_name(f"{outfile.stem}.partial{outfile.suffix or '.jsonl'}")


def errors_path(outfile: Path) -> Path:
    """Upstream's errors file for an output file (0.8.1 :747, 0.9.0 :741)."""
    return outfile.with_name(f"{outfile.stem}.errors{outfile.suffix or '.jsonl'}")


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
    partial = partial_path(final)
    _take_over(final, partial, bool(arguments["resume"]))
    arguments["outfile"] = str(partial)
    state = regen_state.open_run()
    state.max_tokens = arguments["max_tokens"]
    if arguments["resume"]:
        state.seen = module.load_seen(str(partial))
    task = asyncio.ensure_future(call(wrapped, bound))
    waiter = asyncio.ensure_future(state.wake.wait())
    finished = False
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():  # a fault or the error limit: stop every worker now
            await _cancel_all(task)
        else:
            try:
                task.result()  # upstream's own exception, if any
            except BaseException:
                _drop_if_empty(partial)  # nothing to resume: the next run starts afresh
                raise
        if state.stop is None:
            finished = True
    finally:
        waiter.cancel()
        regen_state.close_run()
        write_report(
            final, state.tally, complete=finished, output=str(final if finished else partial),
            errors_file=str(errors_path(final if finished else partial)),
        )  # fmt: skip
    if state.stop is not None:
        raise CompatError(_stopped(state, endpoint, partial, final))
    _finish(state.tally, final, partial)


def _finish(tally: RegenTally, final: Path, partial: Path) -> None:
    if tally.rows_out == 0 and tally.resumed == 0:
        kept = errors_path(partial).exists() and errors_path(partial).stat().st_size > 0
        for path in (partial, errors_path(partial)):
            with contextlib.suppress(FileNotFoundError):
                if not (kept and path == errors_path(partial)):
                    path.unlink()
        where = f"; each failure is in {errors_path(partial)}" if kept else ""
        raise CompatError(
            f"no conversation was regenerated ({tally.summary()}); nothing was written to "
            f"{final}{where}"
        )
    partial.replace(final)
    if errors_path(partial).exists():
        errors_path(partial).replace(errors_path(final))
    print(f"{tally.summary()}; wrote {final}", flush=True)


def _take_over(final: Path, partial: Path, resume: bool) -> None:
    """Refuse what would be appended to silently; on --resume continue the file in place."""
    if not resume:
        for path, what in ((final, "the output of an earlier run"),
                           (partial, "the rows of an interrupted run")):  # fmt: skip
            if path.exists():
                raise CompatError(
                    f"{path} already exists ({what}); speculators would append a second copy "
                    "of every row: pass --resume to regenerate only the conversations missing "
                    "from it, or remove it"
                )
        with contextlib.suppress(FileNotFoundError):
            errors_path(partial).unlink()
        return
    if final.exists() and partial.exists():
        raise CompatError(
            f"both {final} and {partial} exist: keep the one to resume and remove the other"
        )
    if final.exists():
        final.replace(partial)
    for stale in (errors_path(final), errors_path(partial)):  # their conversations are retried
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()


async def _cancel_all(task: asyncio.Task) -> None:
    """Cancel upstream's run and every worker it started (they are not its children: a cancelled
    ``queue.put`` would leave them running)."""
    me = asyncio.current_task()
    for other in asyncio.all_tasks():
        if other is not me:
            other.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _stopped(state: regen_state.RunState, endpoint: str, partial: Path, final: Path) -> str:
    tally = state.tally
    done = tally.regenerated + sum(tally.cut_short.values())
    if state.first_trace and os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        sys.stderr.write(state.first_trace)
    head = state.stop or ""
    if state.server_fault:
        head = f"the vLLM server at {endpoint} failed: {head}"
    if _drop_if_empty(partial):
        return f"{head}; no row was written; {tally.summary()}; fix it and rerun the same command"
    return (
        f"{head}; the rows of the {done} conversations done are in {partial} (partial); "
        f"{tally.summary()}; fix it and rerun the same command with --resume to finish into "
        f"{final}"
    )


def _drop_if_empty(partial: Path) -> bool:
    """Remove a partial output (and its errors file) that holds no row; whether it was empty."""
    if partial.exists() and partial.stat().st_size:
        return False
    for path in (partial, errors_path(partial)):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return True


def _default_outfile(module: Any, arguments: dict[str, Any]) -> str:
    """Upstream's own name for an omitted --outfile (0.9.0 :731): SOURCE_MODEL.jsonl."""
    model = str(arguments["model"])
    dataset = str(arguments["dataset_name"])
    presets = getattr(module, "DATASET_CONFIGS", {}) or {}
    source = presets[dataset].name if dataset in presets else Path(dataset).stem
    model_short = model.split("/")[-1] if "/" in model else model
    return f"{module.sanitize_filename(source)}_{module.sanitize_filename(model_short)}.jsonl"
