"""``python -m speculators_qwen_compat doctor --model M [--data F] [--endpoint U | --drafter D]``.

Before a long run: what the template demands, how the release masks, the verifier's training
view, what the first rows of a file give; ``--endpoint``: does a hidden-states server fit training;
``--drafter``: will vLLM serve it as trained. Writes nothing; a fatal problem is one line, exit 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any, TextIO

from speculators_qwen_compat.cli import flags
from speculators_qwen_compat.cli import support as cli_support
from speculators_qwen_compat.cli.support import data_options, debug_requested, run_main
from speculators_qwen_compat.core.errors import CompatError, reason_of
from speculators_qwen_compat.data.account.quality import LABELS
from speculators_qwen_compat.data.account.run import fixed_run
from speculators_qwen_compat.data.normalize import inline_media
from speculators_qwen_compat.data.normalize.batch import RENDER
from speculators_qwen_compat.doctor import media_endpoint
from speculators_qwen_compat.doctor.drafter_view import print_drafter_view
from speculators_qwen_compat.doctor.dry_run import DryRun, data_files, dry_run
from speculators_qwen_compat.doctor.endpoint import check_endpoint, print_check, verdict
from speculators_qwen_compat.doctor.mask_strategy import detect_strategy
from speculators_qwen_compat.doctor.media_report import ReleaseProcessor
from speculators_qwen_compat.doctor.media_report import build as build_media
from speculators_qwen_compat.doctor.media_report import lines as media_lines
from speculators_qwen_compat.doctor.sample_run import SampleRun, run_sample
from speculators_qwen_compat.doctor.template_profile import (
    TemplateProfile,
    TemplateUnusable,
    profile_template,
)
from speculators_qwen_compat.doctor.training_view import print_training_view
from speculators_qwen_compat.route.declaration import generation as route_generation

SAMPLE_CHARS = 4000
GREEN, RESET = "\x1b[32m", "\x1b[0m"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """doctor's flags, as cli/flags.py declares them."""
    flags.add_arguments(parser, flags.DOCTOR)


def main(args: argparse.Namespace, out: TextIO | None = None) -> int:
    stream = out or sys.stdout

    def body() -> int:
        try:
            _doctor(args, stream)
        finally:
            stream.flush()  # the report so far comes before the error line
        return 0

    return run_main(body, debug_requested(args.debug))


def _doctor(args: argparse.Namespace, out: TextIO) -> None:
    if getattr(args, "drafter", None):
        print_drafter_view(args.drafter, args.model, out)
        return
    if args.rows < 1 or args.seq_length < 1 or args.num_preprocessing_workers < 1:
        raise CompatError("--rows, --seq-length and --num-preprocessing-workers must be positive")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    options = data_options(args)
    files, data_words = data_files(args.data)  # a wrong path fails before the slow imports
    if files:  # inline images judged as prepare_data judges them: written once, to a folder
        # of this process removed at its exit (inline_media.py), nothing beside any output
        options["inline_media_dir"] = str(inline_media.scratch_folder())
    with fixed_run(**options):  # the run's options, fixed once, as prepare_data fixes them
        _examine(args, out, files, data_words)


def _examine(
    args: argparse.Namespace, out: TextIO, files: list[Path], data_words: list[str]
) -> None:
    """Under the run's options: the template, the masks, the training view, the data's first
    rows, the endpoint."""
    pads_problem: str | None = None
    tokenizer = load_tokenizer(args.model)
    try:
        profile = profile_template(tokenizer)
    except TemplateUnusable as exc:
        raise CompatError(f"--model {args.model}: {exc}") from None
    print(f"model: {args.model}", file=out)
    for said in data_words:
        print(f"data: {said}", file=out)
    print_profile(profile, out)

    release, preprocessing = import_preprocessing()
    generation = route_generation(preprocessing).GENERATION  # the route the run takes
    strategy = detect_strategy(preprocessing, tokenizer)
    print(f"masks (speculators {release}):", file=out)
    for line in strategy.describe():
        print(f"  {line}", file=out)
    print_training_view(args.model, out)
    if files:
        loaded = ReleaseProcessor(preprocessing, args.model)
        result = dry_run(
            files, strategy, args.rows, args.seq_length, args.conversations_key, loaded
        )
        sample = None
        if not result.pretokenized and result.lines:
            sample = run_sample(
                result.lines, result.sources, args.model, args.num_preprocessing_workers,
                args.seq_length, args,
            )  # fmt: skip
        print_dry_run(result, args.rows, tokenizer, out, sample, generation == RENDER)
        if sample is not None and sample.failed:
            raise CompatError(
                f"prepare_data fails on the first {len(result.lines)} rows "
                f"(--num-preprocessing-workers {sample.workers}): {sample.error}"
            )
        if result.media.conversations:
            build_media(result.media, result.media_samples, loaded, preprocessing, generation)
            for line in media_lines(result.media):
                print(line, file=out)
            if args.endpoint and result.media_samples and loaded.multimodal():
                pads = media_endpoint.check(
                    args.endpoint, *result.media_samples[0], loaded.get()[0]
                )
                print(
                    f"image rendering through {media_endpoint.render_url(args.endpoint)}:", file=out
                )
                media_endpoint.print_check(pads, out)
                pads_problem = media_endpoint.verdict(pads)
    if args.endpoint:
        probe = tokenizer.encode("Hello, how are you today?", add_special_tokens=False)[:8]
        check = check_endpoint(args.endpoint, args.model, args.target_layer_ids, probe or [0])
        print_check(check, args.endpoint, out)
        problem = "; ".join(filter(None, (pads_problem, verdict(check))))
        if problem:
            raise CompatError(problem)


def load_tokenizer(model: str) -> Any:
    """The model's tokenizer; a missing folder or one without a chat template is fatal."""
    path = Path(model).expanduser()
    # Neither a folder nor a hub id ("name" or "org/name"): say so without a hub round trip.
    if not path.exists() and (model.startswith(("/", ".", "~")) or model.count("/") > 1):
        raise CompatError(f"--model {model}: no such folder")
    import transformers

    transformers.logging.set_verbosity_error()  # probes trigger expected template warnings
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            str(path) if path.exists() else model
        )
    except Exception as exc:
        raise CompatError(
            f"--model {model}: cannot load its tokenizer ({reason_of(exc)}); pass a local "
            "folder or a hub id reachable from here"
        ) from None
    if not getattr(tokenizer, "chat_template", None):
        raise CompatError(f"--model {model}: the tokenizer has no chat template")
    return tokenizer


def import_preprocessing() -> tuple[str, Any]:
    """(installed release, its preprocessing module with our fixes installed)."""
    from speculators_qwen_compat import install

    install()  # the run's fixes: the conversation reader, the fixed probe, local rendering
    preprocessing = cli_support.import_preprocessing()
    return version("speculators"), preprocessing


def _rejects(error: str | None, what: str) -> str:
    return f'yes: {what} raises "{error}"' if error else "no"


def print_profile(profile: TemplateProfile, out: TextIO) -> None:
    if profile.system_error:
        system = f'system messages are rejected: "{profile.system_error}"'
    else:
        system = _rejects(profile.late_system_error, "a system message after other turns")
    prompt = profile.generation_prompt
    if profile.open_think:
        think = "ends in an open <think>: thinking on"
    elif "</think>" in prompt:
        think = "pre-fills an empty think block: thinking off"
    else:
        think = "no think block"
    reasoning = {
        "kept": "kept for every assistant turn",
        "dropped": "dropped for turns before the last user query",
        "not rendered": "not rendered at all (the template ignores reasoning_content)",
    }.get(profile.history_reasoning, profile.history_reasoning)
    lines = [
        ("needs a user turn", _rejects(profile.assistant_only_error, "[assistant] alone")),
        ("system must come first", system),
        ("strict alternation", _rejects(profile.alternation_error, "a repeated role")),
        (
            "generation tags",
            "yes: {% generation %} marks assistant text" if profile.generation_tags else "no",
        ),
        ("generation prompt", f"{prompt!r} ({think})"),
        ("history reasoning", reasoning),
    ]
    print("template profile:", file=out)
    for label, value in lines:
        print(f"  {label + ':':<24}{value}", file=out)


def print_dry_run(
    result: DryRun,
    max_rows: int,
    tokenizer: Any,
    out: TextIO,
    sample: SampleRun | None = None,
    renders: bool = False,
) -> None:
    """``sample``: prepare_data's own run on these rows (sample_run.py), whose counts are the
    promise; ``renders``: the release renders through vLLM (0.8+), here locally."""
    if result.pretokenized:
        print("data: pre-tokenized rows (input_ids, loss_mask) pass through unrendered", file=out)
        return
    tally = result.tally
    print(
        f"data: first {tally.conversations_in} of {result.rows_total} rows "
        f"(--rows {max_rows}); nothing is written",
        file=out,
    )
    kept, rows_out = result.kept, result.rows_out
    skipped, examples = dict(tally.skipped.most_common()), tally.examples
    if sample is not None:
        verdict = "it fails" if sample.failed else "exit 0"
        how = ", rendered locally" if renders else ""
        print(
            f"  prepare_data on these rows (--num-preprocessing-workers {sample.workers}{how}): "
            f"{verdict}",
            file=out,
        )
        if sample.failed:
            print(f"    {sample.error}", file=out)
        else:  # the run's own counts: what the run over these rows keeps
            kept, rows_out = sample.report["conversations_kept"], sample.report["rows_out"]
            skipped, examples = sample.report["skipped"], sample.report["skipped_examples"]
    if sample is None or not sample.failed:
        print(f"  would keep {kept} conversations as {rows_out} rows", file=out)
        total = tally.conversations_in
        print(f"  would skip {sum(skipped.values())} of {total} conversations", file=out)
    for reason, count in skipped.items():
        example = (examples.get(reason) or [""])[0]
        print(f'    {count} x "{reason}"' + (f" (e.g. {example})" if example else ""), file=out)
    unchecked = ["a run with --render-endpoint URL (this one renders locally)"] if renders else []
    if result.rows_total > tally.conversations_in:
        unchecked.insert(
            0,
            f"the {result.rows_total - tally.conversations_in} rows after the first "
            f"{tally.conversations_in} (--rows checks more; a corpus in blocks holds other kinds "
            "further on)",
        )
    if unchecked:
        print(f"  not checked: {'; '.join(unchecked)}", file=out)
    for text, count in tally.notes.most_common():
        print(f"  {count} {text}", file=out)
    found = tally.warnings()
    print(f"  data warnings: {len(found) or 'none'}", file=out)
    for kind, entry in found.items():
        print(f"    {entry['count']} {LABELS[kind]}: {'; '.join(entry['details'][:3])}", file=out)
        print(f"      what to do: {entry['what_to_do']}", file=out)
    if found:
        print("    (prepare_data --strict-data makes these fatal)", file=out)
    if result.sample is None:
        return
    color = _use_color(out)
    legend = "trainable text in green" if color else "trainable text in [[ ]]"
    rows = result.sample.rows
    which = f", row {len(rows)} of {len(rows)}" if len(rows) > 1 else ""
    print(f"sample ({result.sample.source}{which}; {legend}):", file=out)
    text = marked_text(tokenizer, rows[-1].input_ids, rows[-1].loss_mask, color)
    if len(text) > SAMPLE_CHARS:
        text = text[:SAMPLE_CHARS] + " ..."
    for line in text.splitlines():
        print(f"  {line}", file=out)


def marked_text(tokenizer: Any, ids: list[int], mask: list[int], color: bool = False) -> str:
    """The decoded row with its trainable runs wrapped in [[ ]] (or green when ``color``)."""
    pieces: list[str] = []
    start = 0
    for end in range(1, len(ids) + 1):
        if end == len(ids) or bool(mask[end]) != bool(mask[start]):
            text = tokenizer.decode(ids[start:end], skip_special_tokens=False)
            if mask[start]:
                text = f"{GREEN}{text}{RESET}" if color else f"[[{text}]]"
            pieces.append(text)
            start = end
    return "".join(pieces)


def _use_color(out: TextIO) -> bool:
    return out.isatty() and not os.environ.get("NO_COLOR")
