"""Each of our flags is declared once, in cli/flags.py (issue 54): no other module adds one to a
parser or a typer command or keeps a copy of its help, and the table names each flag once. The
package is read as syntax trees (ast), so this needs no release; what the commands' ``--help``
list is tests/test_help_flags.py's."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

from speculators_qwen_compat.cli import flags

pytestmark = pytest.mark.pure  # release-independent: run once (tools/matrix.py)

PACKAGE = Path(__file__).resolve().parents[1] / "speculators_qwen_compat"
TABLE = PACKAGE / "cli" / "flags.py"
#: Other parsers that declare flags of the same names, which are theirs and not ours: upstream's
#: <= 0.7 prepare_data script re-declared (release_script.py), and two commands of their own.
OTHER_PARSERS = {
    "cli/release_script.py": {"--model", "--data", "--seq-length", "--num-preprocessing-workers"},
    "acceptance/command.py": {"--endpoint", "--data", "--model", "--rows", "--debug"},
    "doctor/repair_drafter.py": {"--model", "--debug"},
}
OURS = {flag.name for flag in flags.FLAGS}


def _declared(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, flag) for every flag a module hands to ``add_argument`` or ``typer.Option``."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name not in ("add_argument", "Option"):
            continue
        for arg in node.args:
            if isinstance(arg, ast.Constant) and str(arg.value).startswith("-"):
                found.append((node.lineno, str(arg.value)))
    return found


def _strings(tree: ast.AST) -> list[str]:
    """Every string a module holds (adjacent literals are one constant)."""
    nodes = ast.walk(tree)
    return [n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _modules() -> dict[str, ast.AST]:
    return {
        path.relative_to(PACKAGE).as_posix(): ast.parse(path.read_text(encoding="utf-8"))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != TABLE
    }


def test_no_module_but_the_table_declares_our_flags() -> None:
    wrong = {}
    for where, tree in _modules().items():
        allowed = OTHER_PARSERS.get(where, set())
        found = [(line, f) for line, f in _declared(tree) if f in OURS and f not in allowed]
        if found:
            wrong[where] = found
    assert not wrong, f"flags of cli/flags.py declared again: {wrong}"


def test_the_other_parsers_declare_none_of_our_data_flags() -> None:
    """What the allowance above lets through is only each parser's own flags of the same name:
    none of prepare_data's or regenerate-responses' flags of ours."""
    ours_only = {f.name for f in flags.FLAGS if f.data or flags.REGENERATE in f.commands}
    ours_only |= {flags.STRICT_DATA.name, flags.RENDER_RETRY_SECONDS.name}
    for names in OTHER_PARSERS.values():
        assert not names & ours_only, names


def test_no_module_keeps_a_copy_of_a_flags_help() -> None:
    """A help text lives in the table only (prepare_data's help block once was a copy); the
    other parsers' flags of the same name have words of their own."""
    lines = {
        line.strip(): flag.name
        for flag in flags.FLAGS
        for line in flag.help.split("\n")
        if len(line.strip()) >= 30
    }
    copies = [
        (where, name, line)
        for where, tree in _modules().items()
        for text in _strings(tree)
        for line, name in lines.items()
        if line in " ".join(text.split()) and name not in OTHER_PARSERS.get(where, set())
    ]
    assert not copies, copies


def test_the_table_names_each_flag_once() -> None:
    names = [flag.name for flag in flags.FLAGS]
    assert len(names) == len(set(names)), names
    known = {flags.PREPARE_DATA, flags.DOCTOR, flags.REGENERATE}
    for flag in flags.FLAGS:
        assert flag.commands and set(flag.commands) <= known, flag
        assert flag.name.startswith("--") and flag.dest.isidentifier(), flag
        if flag.data:  # doctor hands them to its sample run of prepare_data
            assert set(flag.commands) == {flags.PREPARE_DATA, flags.DOCTOR}, flag


def test_a_parser_from_the_table_reads_what_the_commands_read() -> None:
    parser = argparse.ArgumentParser(add_help=False)
    flags.add_arguments(parser, flags.DOCTOR)
    args = parser.parse_args(
        ["--model", "m", "--data", "a", "--data", "b", "--target-layer-ids", "2", "5",
         "--unknown-roles", "skip", "--debug"]
    )  # fmt: skip
    assert (args.model, args.data, args.target_layer_ids) == ("m", ["a", "b"], [2, 5])
    assert (args.rows, args.seq_length, args.num_preprocessing_workers) == (200, 8192, 8)
    assert (args.unknown_roles, args.debug, args.media_dir) == ("skip", True, None)
    again = parser.parse_args(["--model", "m"])
    assert again.data == [], "the --data default list is a fresh one per parse"

    prepare = argparse.ArgumentParser(add_help=False)
    flags.add_arguments(prepare, flags.PREPARE_DATA)
    ours, rest = prepare.parse_known_args(
        ["--model", "m", "--render-retry-seconds", "x", "--strict-data", "--seed", "1"]
    )
    assert rest == ["--model", "m", "--seed", "1"]
    assert (ours.render_retry_seconds, ours.strict_data, ours.debug) == ("x", True, False)


def test_prepare_data_help_block_layout() -> None:
    """The block after the release's help: a title, then each flag with its value's name and
    its help in one column (the lines as the table breaks them)."""
    block = flags.help_block(flags.PREPARE_DATA).split("\n")
    assert block[:2] == ["", flags.BLOCK_TITLE] and block[-1] == ""
    rows = [line for line in block[2:] if line.startswith("  --")]
    assert [row.split()[0] for row in rows] == [f.name for f in flags.of_command("prepare_data")]
    assert all(line[27] == " " and line[28] != " " for line in block[2:-1]), block


def test_doctor_hands_the_data_flags_it_was_given_to_its_sample_run() -> None:
    from speculators_qwen_compat.doctor import sample_run

    parser = argparse.ArgumentParser(add_help=False)
    flags.add_arguments(parser, flags.DOCTOR)
    args = parser.parse_args(
        ["--model", "m", "--unknown-roles", "skip", "--media-dir", "d", "--prompt-column", "a,b",
         "--response-column", "c", "--debug", "--rows", "3", "--endpoint", "http://h/v1"]
    )  # fmt: skip
    assert sample_run._forwarded(args) == [
        "--prompt-column", "a,b", "--response-column", "c", "--unknown-roles", "skip",
        "--media-dir", "d",
    ]  # fmt: skip
