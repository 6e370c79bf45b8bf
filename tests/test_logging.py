"""Logging: nothing of ours configures the root logger (upstream's 0.8+ command and users do),
every line of ours is under the package's logger, and it is printed once."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

import speculators_qwen_compat
from speculators_qwen_compat.cli.support import PACKAGE_LOGGER, log_to_stderr

pytestmark = pytest.mark.pure  # the package's own source and loggers: run once (tools/matrix.py)

PACKAGE = Path(speculators_qwen_compat.__file__).parent
ROOT_CALLS = {"basicConfig", "debug", "info", "warning", "error", "exception", "critical", "log"}


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


def test_no_root_logger_configuration_or_root_lines_in_the_package() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE)
        for call in _calls(ast.parse(path.read_text(encoding="utf-8"))):
            func = call.func
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "logging"
            ):
                if func.attr in ROOT_CALLS:
                    offenders.append(
                        f"{path.relative_to(PACKAGE)}:{call.lineno} logging.{func.attr}"
                    )
                if func.attr == "getLogger":
                    name = call.args[0] if call.args else None
                    if not (
                        isinstance(name, ast.Constant)
                        and str(name.value).split(".")[0] == PACKAGE_LOGGER
                    ) and not isinstance(name, ast.Name):  # log_to_stderr(name) is given it
                        offenders.append(f"{where}:{call.lineno} getLogger")
    assert offenders == []


def test_entry_point_logging_leaves_the_root_logger_alone() -> None:
    root = logging.getLogger()
    before = list(root.handlers), root.level
    ours = logging.getLogger(PACKAGE_LOGGER)
    saved = list(ours.handlers), ours.level, ours.propagate
    try:
        log_to_stderr(PACKAGE_LOGGER)
        log_to_stderr(PACKAGE_LOGGER)  # a second call adds nothing
        assert (list(root.handlers), root.level) == before
        assert len(ours.handlers) == len(saved[0]) + 1
        assert ours.propagate is False  # a root handler (upstream's basicConfig) cannot repeat it
    finally:
        ours.handlers[:] = saved[0]
        ours.setLevel(saved[1])
        ours.propagate = saved[2]
