"""One regenerate-responses run: upstream's ``_run`` in one writer's lock, stopped at once on a
server fault or a limit, ended with the report and one line.

Target: upstream's ``_run`` (0.8+), through fixes/regenerate/regen_run.py; the order of a run:
``_run`` here, and docs/regenerate-responses.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from speculators_qwen_compat.core.errors import DEBUG_ENV, CompatError
from speculators_qwen_compat.core.upstream import bind, call
from speculators_qwen_compat.regenerate import output as files
from speculators_qwen_compat.regenerate import settings as run_settings
from speculators_qwen_compat.regenerate import state as regen_state
from speculators_qwen_compat.regenerate.loop import chat_endpoint
from speculators_qwen_compat.regenerate.tally import (
    RegenTally,
    report_path,
    reserve_room,
    write_report,
)

ERROR_PREFIX = "speculators_qwen_compat: error: "


async def guarded_run(wrapped: Any, args: tuple, kwargs: dict, module: Any) -> None:
    """Upstream's ``_run`` (``wrapped``) as one run: a CompatError ends it with one line, exit 1."""
    if regen_state.current() is not None:  # nested: the outer run counts
        return await wrapped(*args, **kwargs)
    try:
        await _run(wrapped, args, kwargs, module)
    except CompatError as exc:
        print(f"{ERROR_PREFIX}{exc}", file=sys.stderr, flush=True)
        raise SystemExit(1) from exc
    except OSError as exc:  # a file that cannot be read or written (read-only, full, gone)
        if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
            raise
        where = f"{exc.filename}: " if exc.filename else "a file: "
        print(f"{ERROR_PREFIX}cannot use {where}{exc.strerror or exc}", file=sys.stderr, flush=True)
        raise SystemExit(1) from exc


async def _run(wrapped: Any, args: tuple, kwargs: dict, module: Any) -> None:
    """The endpoint's route added (loop.chat_endpoint), ``--model`` detected (a dead endpoint is
    one line), the settings recorded and, on ``--resume``, compared with the earlier run's
    (settings.py: refused unless ``--allow-changed-settings``), output.take (the lock; an earlier
    output becomes the partial file), the report written with the settings (a run killed later
    leaves it), upstream's ``_run`` with ``--outfile`` pointed at the partial file, then the
    publish (rows added) or the earlier output put back as it was (output.restore), and the
    report (tally.py) written last, agreeing with the exit code and the files (Ctrl-C included).
    ``module`` is upstream's CLI module: its ``detect_model``, ``load_seen``,
    ``sanitize_filename`` and ``DATASET_CONFIGS`` are called, not copied."""
    bound = bind(wrapped, args, kwargs)
    arguments = bound.arguments
    given = arguments["endpoint"]
    endpoint = arguments["endpoint"] = chat_endpoint(given)
    if arguments["model"] is None:
        try:
            arguments["model"] = await module.detect_model(endpoint)
        except ValueError as exc:
            raise CompatError(
                f"no vLLM server answered at {endpoint} ({' '.join(str(exc).split())[:300]}); "
                "nothing was done: start the server or fix --endpoint"
            ) from exc
    final = Path(arguments["outfile"] or _default_outfile(module, arguments))
    record = _record(arguments, given, final)
    output = files.take(final, bool(arguments["resume"]))
    output.record = record
    output.rows_in = lambda: _rows_in(arguments["dataset_name"], arguments["limit"])
    try:
        seen = _set_up(output, module, bool(arguments["resume"]))
        await _locked_run(wrapped, bound, module, output, seen)
    except CompatError as exc:
        if output.report_failed:
            raise CompatError(f"{exc}; {output.report_failed}") from exc
        raise
    except (asyncio.CancelledError, KeyboardInterrupt):  # Ctrl-C: an earlier output keeps its name
        await _interrupted(output)
        raise
    finally:
        output.release()
    if output.report_failed:
        raise CompatError(output.report_failed)


def _record(arguments: dict[str, Any], given: str, final: Path) -> dict[str, Any]:
    """What the report records of this run's settings (settings.py); on ``--resume``, the
    earlier run's compared first: a generation setting that differs is refused in one line
    unless ``--allow-changed-settings``, and then the report keeps both; a changed data file
    is noted (``data_changed``)."""
    now = run_settings.gather(arguments, given)
    record: dict[str, Any] = {"settings": now}
    earlier_output = final.exists() or files.partial_path(final).exists()
    earlier = run_settings.earlier_report(report_path(final)) if arguments["resume"] else None
    before = earlier.get("settings") if earlier and earlier_output else None
    if not isinstance(before, dict):
        return record
    names = run_settings.changed(before, now)
    if names and not regen_state.SETTINGS.allow_changed_settings:
        raise run_settings.refusal(names, before, now, final)
    if names:
        record["settings_changed"] = [run_settings.GENERATION[name] for name in names]
    kept = run_settings.carried(earlier, now)
    if kept:
        record["earlier_settings"] = kept
    if before.get("dataset_fingerprint") != now.get("dataset_fingerprint"):
        record["data_changed"] = {
            "earlier": {k: before.get(k) for k in ("dataset", "dataset_fingerprint")},
            "now": {k: now.get(k) for k in ("dataset", "dataset_fingerprint")},
        }
    return record


async def _interrupted(output: files.Output) -> None:
    """The run was interrupted (Ctrl-C; upstream then exits 130): once nothing runs (at most
    INTERRUPT_WAIT s), an earlier output this run added nothing to goes back under its own name
    (its rows stay in the partial file if it added any), the report is written (the counts so
    far, the rest ``not_reached``, exit code 130) and one line says where the rows are and that
    --resume goes on. A second Ctrl-C ends the wait, not the putting back: it is never
    swallowed."""
    try:
        me = asyncio.current_task()
        others = [task for task in asyncio.all_tasks() if task is not me]
        for task in others:
            task.cancel()
        if others:
            await asyncio.wait(others, timeout=INTERRUPT_WAIT)
    finally:
        where: Path | None = output.partial
        with contextlib.suppress(OSError):
            where = output.partial if output.added() else files.restore(output)
        tally = output.tally or RegenTally()
        tally.conversations_in = max(tally.conversations_in, output.rows_in())
        tally.not_reached = max(0, tally.conversations_in - tally.counted())
        _end(output, tally, complete=False, code=INTERRUPTED, rows_at=where)
        line = f"interrupted (Ctrl-C); {_where_now(output, where)}; {tally.summary()}"
        if output.report_failed:
            line += f"; {output.report_failed}"
        print(f"{ERROR_PREFIX}{line}", file=sys.stderr, flush=True)


#: upstream's exit code on Ctrl-C (typer's), recorded in the report of an interrupted run
INTERRUPTED = 130


#: seconds an interrupted run waits for upstream's workers to end before it puts files back
INTERRUPT_WAIT = 5.0


def _where_now(output: files.Output, where: Path | None) -> str:
    """Where an interrupted run left the rows, and how to go on."""
    if where is None:
        return "no row was written; rerun the same command"
    if output.appeared:
        return _appeared(output)
    if where == output.final:
        return (
            f"nothing was added, {where} is as it was; rerun the same command with --resume "
            "to go on"
        )
    return (
        f"the rows are in {where} (partial); rerun the same command with --resume to finish "
        f"into {output.final}"
    )


def set_report_aside(final: Path) -> Path | None:
    """An earlier run's report moves to the next free ``OUTFILE.report.N.json`` (the errors
    files' way, never over a file): a run that stops before writing its own leaves no report
    that is not about it, and no run's report is ever lost. Where it went (None: none)."""
    report = report_path(final)
    with contextlib.suppress(FileNotFoundError):
        return files.set_aside(report, report.name[: -len(".json")] + ".", ".json")
    return None


def _set_up(output: files.Output, module: Any, resume: bool) -> set[str]:
    """The last steps before upstream runs: the earlier report set aside, and (``--resume``)
    the conversations already in the earlier rows, read by upstream's ``load_seen``. One that
    fails puts the earlier output back under its own name and is one line."""
    try:
        set_report_aside(output.final)
    except OSError as exc:
        what = f"cannot set aside the earlier report {report_path(output.final)}"
        raise files.not_started(output, f"{what}: {files.why(exc)}") from exc
    try:  # what this run uses, before any request: a run killed later leaves this report
        write_report(output.final, RegenTally(), complete=False, exit_code=None, output=None,
                     errors_file=None, **output.record)  # fmt: skip
    except OSError as exc:
        what = f"cannot write the report {report_path(output.final)}"
        raise files.not_started(output, f"{what}: {files.why(exc)}") from exc
    reserve_room(output.final)  # the room of the last report, should the disk fill
    if not resume:
        return set()
    earlier = output.final if output.from_final else output.partial
    try:
        return set(module.load_seen(str(output.partial)))
    except Exception as exc:  # not UTF-8, a line that is JSON but not a row: upstream's errors
        what = f"cannot read the earlier rows in {earlier} to resume them"
        raise files.not_started(output, f"{what} ({files.why(exc)})") from exc


async def _locked_run(
    wrapped: Any, bound: Any, module: Any, output: files.Output, seen: set[str]
) -> None:
    arguments = bound.arguments
    endpoint = arguments["endpoint"]
    arguments["outfile"] = str(output.partial)
    state = regen_state.open_run()
    output.tally = state.tally
    state.writer = files.RowWriter(output.handle.fileno(), output.partial)
    state.errors_writer = files.ErrorsWriter(output.errors, state.writer)
    state.max_tokens = arguments["max_tokens"]
    state.endpoint = endpoint
    tally = state.tally
    tally.torn_rows = output.torn
    state.seen = seen
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
        state.errors_writer.close()
        regen_state.close_run()
    if state.write_fault:
        # what upstream raised after it is that fault's (its worker writes the errors file on
        # the same full disk): the run's line is the write fault's, with where the rows are
        failure = None
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
        try:
            files.publish(output)
        except CompatError:  # a file appeared at --outfile: the rows stay in the partial file
            _end(output, tally, complete=True, code=1, rows_at=output.partial)
            raise
        _end(output, tally, complete=True, code=0, rows_at=final)
        line = f"{tally.summary()}; wrote {final}"
        if _failures_in(output) and output.errors != files.errors_path(final):
            line += (
                f"; each failure is in {output.errors} ({files.errors_path(final)} appeared "
                "while this run went on: kept as it is)"
            )
        print(line, flush=True)
        return
    where = files.restore(output)
    noted = f"; each failure is in {output.errors}" if _failures_in(output) else ""
    if output.appeared:
        _end(output, tally, complete=True, code=1, rows_at=where)
        raise CompatError(
            f"nothing new was regenerated ({tally.summary()}); {_appeared(output)}{noted}"
        )
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
    """The report, the run's last write: what was counted, the exit code, where the rows are.
    A report that cannot be written (a full disk past the room kept for it) leaves the one
    written when the run started (its settings, for the next ``--resume``), and the run says
    so in its line (``output.report_failed``)."""
    try:
        write_report(
            output.final, tally, complete=complete, exit_code=code,
            output=str(rows_at) if rows_at else None,
            errors_file=str(output.errors) if _failures_in(output) else None,
            **output.record,
        )  # fmt: skip
    except OSError as exc:
        output.report_failed = (
            f"cannot write {report_path(output.final)}: {exc.strerror or exc} (it holds the "
            "report written when the run started: its settings, no counts)"
        )


def _failures_in(output: files.Output) -> bool:
    """Whether this run's errors file holds a failure."""
    return output.errors.exists() and output.errors.stat().st_size > 0


def _rows_in(dataset: str, limit: int | None) -> int:
    """Conversations in a local ``--dataset`` file (at most ``--limit``), for ``not_reached``;
    0 for a preset (not read again)."""
    path = Path(str(dataset))
    count = 0
    with contextlib.suppress(OSError, ValueError):
        if path.suffix.lower() == ".jsonl":  # bytes: a line that is not UTF-8 is a row too
            with path.open("rb") as file:
                count = sum(1 for line in file if line.strip())
        elif path.suffix.lower() == ".json":
            value = json.loads(path.read_text(encoding="utf-8"))
            count = len(value) if isinstance(value, list) else 1
    return min(count, limit) if limit is not None else count


async def _cancel_all(task: asyncio.Task) -> None:
    """Cancel upstream's run and every worker it started (they are not its children: a cancelled
    ``queue.put`` would leave them running), and wait for the run to end. Its CancelledError is
    the one asked for here; a Ctrl-C meanwhile (asyncio.run cancels this task) is not: it goes on
    to ``_run``'s Ctrl-C ending (exit 130) instead of being swallowed with it."""
    me = asyncio.current_task()
    for other in asyncio.all_tasks():
        if other is not me:
            other.cancel()
    try:
        await task
    except asyncio.CancelledError:
        if me is not None and me.cancelling():  # this task was cancelled too: Ctrl-C
            raise


def _stopped(
    state: regen_state.RunState, endpoint: str, output: files.Output, rows_at: Path | None
) -> str:
    tally = state.tally
    if state.first_trace and os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        sys.stderr.write(state.first_trace)
    head = state.stop or ""
    if state.server_fault:
        head = f"the vLLM server at {endpoint} failed: {head}"
    if state.write_fault:
        where = f"the rows written are in {rows_at}" if rows_at else "no row was written"
        resume = f" to finish into {output.final}" if rows_at == output.partial else ""
        return (
            f"{head}; {where}; {tally.summary()}; rerun the same command with --resume{resume} "
            "once there is room"
        )
    if rows_at is None:
        return f"{head}; no row was written; {tally.summary()}; fix it and rerun the same command"
    if output.appeared:
        return f"{head}; {_appeared(output)}; {tally.summary()}"
    if rows_at == output.final:
        return (
            f"{head}; nothing was added, {output.final} is as it was; {tally.summary()}; fix it "
            "and rerun the same command"
        )
    return (
        f"{head}; the rows are in {output.partial} (partial); {tally.summary()}; fix it and "
        f"rerun the same command with --resume to finish into {output.final}"
    )


def _appeared(output: files.Output) -> str:
    return (
        f"{output.final} appeared while this run went on: the earlier rows are in "
        f"{output.partial}, as they were; both are kept: compare them and keep one"
    )


def _default_outfile(module: Any, arguments: dict[str, Any]) -> str:
    """Upstream's name for an omitted --outfile (computed inline in ``_run``, no function to
    call; docs/upstream.md, "Regenerate responses"): SOURCE_MODEL.jsonl through upstream's
    ``sanitize_filename``."""
    model = str(arguments["model"])
    dataset = str(arguments["dataset_name"])
    presets = getattr(module, "DATASET_CONFIGS", {}) or {}
    source = presets[dataset].name if dataset in presets else Path(dataset).stem
    model_short = model.split("/")[-1] if "/" in model else model
    return f"{module.sanitize_filename(source)}_{module.sanitize_filename(model_short)}.jsonl"
