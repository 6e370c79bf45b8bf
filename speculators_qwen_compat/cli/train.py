"""``python -m speculators_qwen_compat.train ARGS``: the installed release's trainer, fixes on.

0.8+: runs ``speculators.train`` as ``python -m speculators.train`` would; <= 0.7: the git-only
``scripts/train.py`` (``--script PATH`` or ``SPECULATORS_REPO``). Works under torchrun (every rank
activates the fixes); only our own problems (no trainer found) are one line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from speculators_qwen_compat.cli.run import run_target
from speculators_qwen_compat.cli.support import (
    DEBUG_ENV_HINT,
    activate,
    debug_requested,
    has_module,
    run_main,
)
from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.training.save_path import refuse_overlap

REPO_ENV = "SPECULATORS_REPO"
TRAIN_MODULE = "speculators.train"


def trainer_command(args: list[str]) -> list[str]:
    """The run_target arguments that start this release's trainer with ``args``."""
    script, rest = _script_option(args)
    if script is None and os.environ.get(REPO_ENV):
        script = str(Path(os.environ[REPO_ENV]) / "scripts" / "train.py")
    if script is not None:
        if not os.path.isfile(script):
            raise CompatError(f"no trainer script at {script}; pass --script PATH/scripts/train.py")
        return [script, *rest]
    if has_module(f"{TRAIN_MODULE}.__main__"):
        return ["-m", TRAIN_MODULE, *rest]
    raise CompatError(
        "this speculators release ships no trainer in its wheel (<= 0.7: scripts/train.py lives "
        f"in the git repository); pass --script PATH/TO/scripts/train.py or set {REPO_ENV} to "
        "an upstream checkout"
    )


def _script_option(args: list[str]) -> tuple[str | None, list[str]]:
    for i, arg in enumerate(args):
        if arg == "--script" and i + 1 < len(args):
            return args[i + 1], args[:i] + args[i + 2 :]
        if arg.startswith("--script="):
            return arg.split("=", 1)[1], args[:i] + args[i + 1 :]
    return None, args


def _option(args: list[str], name: str) -> str | None:
    """The last value of ``name`` in ``args`` (``--name V`` or ``--name=V``), as argparse reads."""
    value = None
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(f"{name}="):
            value = arg.split("=", 1)[1]
    return value


def check_save_path(args: list[str]) -> None:
    """Refuses a --save-path over --from-pretrained's folder before the trainer starts."""
    refuse_overlap(_option(args, "--save-path"), _option(args, "--from-pretrained"))


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)

    def body() -> int:
        check_save_path(args)
        activate()
        return run_target(trainer_command(args))

    return run_main(body, debug_requested(), DEBUG_ENV_HINT, ours_only=True)


if __name__ == "__main__":
    sys.exit(main())
