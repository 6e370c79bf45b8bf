"""``python -m speculators_qwen_compat.regenerate_responses ARGS``: on-policy replies, fixed.

0.8+: upstream's ``regenerate-responses`` with our flags and the regenerate fixes on
(docs/regenerate-responses.md). <= 0.7: the git-only script (``--script``, ``SPECULATORS_REPO``)
run as it is: not importable, so no fix reaches it (docs/upstream.md, "Regenerate responses").
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from speculators_qwen_compat.cli import frozen_imports
from speculators_qwen_compat.cli.deferred_compile import compile_on_first_call
from speculators_qwen_compat.cli.run import run_target
from speculators_qwen_compat.cli.support import (
    DEBUG_ENV_HINT,
    PACKAGE_LOGGER,
    activate,
    debug_requested,
    has_module,
    log_to_stderr,
    run_main,
)
from speculators_qwen_compat.cli.train import REPO_ENV, _script_option
from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.core.upstream import CLI_REGENERATE

PROG = "python -m speculators_qwen_compat.regenerate_responses"
COMMAND = "regenerate-responses"
SCRIPT = Path("scripts") / "response_regeneration" / "script.py"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)

    def body() -> int:
        log_to_stderr(PACKAGE_LOGGER)
        activate()
        with frozen_imports.importing(), compile_on_first_call():
            typer_command = has_module(CLI_REGENERATE)
        script, rest = _script_option(args)
        if script is None and not typer_command and os.environ.get(REPO_ENV):
            script = str(Path(os.environ[REPO_ENV]) / SCRIPT)
        if script is not None:
            if not os.path.isfile(script):
                raise CompatError(f"no response-regeneration script at {script}")
            return run_target([script, *rest])
        if not typer_command:
            raise CompatError(
                "this speculators release has no regenerate-responses command (<= 0.7: "
                f"{SCRIPT.as_posix()} lives in the git repository); pass --script "
                f"PATH/TO/{SCRIPT.as_posix()} or set {REPO_ENV} to an upstream checkout"
            )
        return _run_typer_command(rest)

    return run_main(body, debug_requested(), DEBUG_ENV_HINT)


def _run_typer_command(args: list[str]) -> int:
    import typer
    from speculators.cli import app

    os.environ.setdefault("COLUMNS", "140")  # rich cuts long flag names when not a terminal
    command = typer.main.get_command(app).commands[COMMAND]
    try:
        code = command.main(args=args, prog_name=PROG, standalone_mode=False)
    except SystemExit as exc:  # the run fix's one-line failure, or upstream's exit
        return exc.code if isinstance(exc.code, int) else 1
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
