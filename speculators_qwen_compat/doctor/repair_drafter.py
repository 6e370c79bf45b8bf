"""``repair-drafter SRC --output DST [--model M] [--config-only]``: a copy vLLM 0.32 serves as the
drafter trained. Why: plain speculators saves M-RoPE keys vLLM refuses or rotates by, and an
attention flag it may read otherwise (training/served_drafter.py). Weights copied unchanged, SRC
never written; a mis-scaled drafter is refused unless ``--config-only`` (a config fix serves it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from speculators_qwen_compat.cli.support import debug_requested, run_main
from speculators_qwen_compat.core.errors import CompatError, reason_of
from speculators_qwen_compat.doctor import drafter_view as dv
from speculators_qwen_compat.training import drafter_record as dr
from speculators_qwen_compat.training import norm_verdict as nv
from speculators_qwen_compat.training import served_drafter as sd


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("src", metavar="SRC", help="a drafter folder as speculators saved it")
    parser.add_argument("--output", required=True, metavar="DST", help="the copy to write")
    parser.add_argument(
        "--model",
        default=None,
        help="the verifier vLLM will serve (default: the one SRC's config records)",
    )
    parser.add_argument(
        "--config-only",
        action="store_true",
        help="write the copy even for a drafter trained on mis-scaled targets (it still is)",
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of a fatal error")


def main(args: argparse.Namespace, out: TextIO | None = None) -> int:
    stream = out or sys.stdout

    def body() -> int:
        repair(args.src, args.output, args.model, args.config_only, stream)
        return 0

    return run_main(body, debug_requested(args.debug))


def repair(src: str, output: str, model: str | None, config_only: bool, out: TextIO) -> None:
    source, target = Path(src).expanduser(), Path(output).expanduser()
    config = dv.drafter_config(src, "repair-drafter")
    if target.exists() or target.is_symlink():
        raise CompatError(f"--output {output} exists; name a new folder (nothing was written)")
    if target.resolve() == source.resolve() or source.resolve() in target.resolve().parents:
        raise CompatError(f"--output {output} is SRC or inside it; name a folder outside {src}")
    verifier = model or str(nv.recorded_verifier(config).get("name_or_path") or "")
    if not verifier:
        raise CompatError(f"{src}: its config records no verifier; pass --model")
    types = dv.model_types(dv.verifier_config(verifier))  # unreadable: fails before writing
    verdict = nv.judge(config, dr.read(source), types)
    kind = sd.speculator_type(config)
    if verdict.word == nv.MIS_SCALED and not config_only:
        raise CompatError(
            f"{src}: verifier norm mis-scaled ({verdict.why}); a config fix alone would serve a "
            f"drafter trained on the wrong targets. {dv.mend_line(src, verifier, kind)}; "
            "--config-only writes the copy anyway"
        )
    try:
        served, changes = sd.serving_config(config)
    except ValueError as exc:
        raise CompatError(f"{src}: no config vLLM 0.32 reads serves it as trained: {exc}") from None
    _copy(source, target, served)
    print(f"wrote {output}: a copy of {src} (weights unchanged; {src} untouched)", file=out)
    for change in changes or ["nothing: vLLM already serves it as it trained"]:
        print(f"  config.json: {change}", file=out)
    ignored = dr.ignored_because(source)
    if ignored:
        print(f"record ignored: {ignored}", file=out)
    print(f"verifier norm: {verdict.word}: {verdict.why}", file=out)
    check = dv.check_drafter(output, verifier)
    print("serve it:", file=out)
    print(f"  {check.serve}", file=out)


def _copy(source: Path, target: Path, config: dict) -> None:
    """SRC's files (links followed: ``checkpoint_best`` is one) into a folder beside ``target``,
    config.json replaced, then renamed into place: a failed copy leaves no ``target``."""
    staging = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        shutil.copytree(source, staging / "copy", symlinks=False)
        (staging / "copy" / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        os.replace(staging / "copy", target)
    except OSError as exc:
        raise CompatError(f"cannot write {target} ({reason_of(exc)})") from None
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
