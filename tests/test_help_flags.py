"""prepare_data, doctor and regenerate_responses ``--help`` list the flags they listed before
the flag table (cli/flags.py): tests/golden/help_flags.json, per release, recorded from the
commands as they were. The three run in one interpreter of the installed release."""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path

import pytest
from conftest import PACKAGE_MAIN, PREPARE_MAIN, run_batch

GOLDEN = Path(__file__).resolve().with_name("golden") / "help_flags.json"
REGENERATE_MAIN = "speculators_qwen_compat.cli.regenerate_responses"
#: command -> (the module whose main runs, its arguments)
HELP = {
    "prepare_data": (PREPARE_MAIN, ["--help"]),
    "doctor": (PACKAGE_MAIN, ["doctor", "--help"]),
    "regenerate_responses": (REGENERATE_MAIN, ["--help"]),
}
#: An option a help lists: argparse's and our block's rows ("  --flag ..."), rich's table rows
#: ("│ *  --flag ...", "│ --flag ..."), and the negative form rich puts beside a switch.
LISTED = re.compile(r"^(?:  |│\s+(?:\*\s+)?)(-{1,2}[a-z][\w-]*)(?:\s+(--no-[\w-]+))?", re.M)


def listed_flags(text: str) -> list[str]:
    """The options a ``--help`` text lists, sorted (prose mentioning a flag is not a row)."""
    return sorted({name for row in LISTED.findall(text) for name in row if name})


def help_runs(logs: Path) -> dict[str, dict[str, object]]:
    """command -> its ``--help``'s exit code and the flags it lists, on the installed release
    (wide enough that rich cuts no flag name)."""
    ran = run_batch(
        logs,
        {name: args for name, (_, args) in HELP.items()},
        modules={name: module for name, (module, _) in HELP.items()},
        COLUMNS="200",
    )
    return {
        name: {"code": result.returncode, "flags": listed_flags(result.stdout)}
        for name, result in ran.items()
    }


def test_help_lists_the_flags_it_listed(tmp_path: Path) -> None:
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))[version("speculators")]
    assert help_runs(tmp_path / "logs") == expected


@pytest.mark.pure
def test_listed_flags_reads_rows_not_prose() -> None:
    text = (
        "options:\n  -h, --help   show this\n  --model MODEL  a model (see --data)\n"
        "                        --not-a-row\n│ *  --data   <list>  x │\n"
        "│    --skip-token-freq            --no-skip-token-freq    <bool> │\n"
        "│ --endpoint   <str>   vLLM ... --max-retries │\n"
    )
    assert listed_flags(text) == sorted(
        ["-h", "--model", "--data", "--skip-token-freq", "--no-skip-token-freq", "--endpoint"]
    )
