"""``python -m speculators_qwen_compat status|doctor|acceptance|repair-drafter ...``.

``status``: versions, whether we test this release, per fix its state and why; ``--route``: the
upstream functions a prepare_data row passes (route/). ``doctor``: doctor/command.py;
``acceptance``: acceptance/command.py; ``repair-drafter``: doctor/repair_drafter.py.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from speculators_qwen_compat import install, status
from speculators_qwen_compat.cli import frozen_imports
from speculators_qwen_compat.cli.deferred_compile import compile_on_first_call
from speculators_qwen_compat.core.releases import TESTED_RELEASES


def _version(dist: str) -> str | None:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def status_report() -> dict[str, Any]:
    from speculators_qwen_compat.core import startup
    from speculators_qwen_compat.core.errors import CompatError

    with contextlib.suppress(CompatError):  # recorded in startup.activation_error
        install()
    speculators = _version("speculators")
    failed = startup.activation_error
    return {
        "activation": f"failed: {failed}" if failed else "ok",
        "speculators": speculators,
        "tested": speculators in TESTED_RELEASES,
        "transformers": _version("transformers"),
        "datasets": _version("datasets"),
        "patches": [_with_release(vars(s), speculators) for s in status()] if speculators else [],
    }


def _with_release(patch: dict[str, Any], release: str) -> dict[str, Any]:
    """A fix's status plus whether this release is inside the releases it was tested on."""
    from speculators_qwen_compat.core.targets import ReleaseRange

    tested = patch.get("tested") or ""
    inside = bool(tested) and release in ReleaseRange.parse(tested)
    return {**patch, "this_release": "inside" if inside else "outside"}


def _print_status(report: dict[str, Any]) -> None:
    if not report["speculators"]:
        print(
            "speculators not installed in this venv: nothing to fix yet (pip install speculators)"
        )
    else:
        tested = "tested" if report["tested"] else "untested: fixes apply where their targets fit"
        print(f"speculators {report['speculators']} ({tested})")
    print(f"transformers {report['transformers']}, datasets {report['datasets']}")
    if report["activation"] != "ok":
        print(f"activation {report['activation']}")
    release = report["speculators"]
    for patch in report["patches"]:
        where = f"tested {patch['tested']} / {release} {patch['this_release']}"
        print(f"  {patch['name']:<16} {patch['state']:<15} {where:<37} {patch['reason']}")


def _print_route(report: dict[str, Any]) -> int:
    """The installed generation's route (route/declaration.py), with the fixes applied here."""
    if not report["speculators"]:
        print("speculators not installed in this venv: no route to show (pip install speculators)")
        return 0
    import importlib

    from speculators_qwen_compat.core.upstream import PREPROCESSING
    from speculators_qwen_compat.route.declaration import lines

    tested = "tested" if report["tested"] else "untested"
    print(f"speculators {report['speculators']} ({tested})")
    # the release's own module names its generation, whether or not the fixes imported it
    # (switched off, or an activation that failed)
    try:
        preprocessing = importlib.import_module(PREPROCESSING)
    except Exception as exc:  # upstream's import may raise anything
        print(
            f"speculators_qwen_compat: error: speculators' {PREPROCESSING} does not import here "
            f"({type(exc).__name__}: {exc}): no route to show; repair the venv's speculators",
            file=sys.stderr,
        )
        return 1
    acting = {patch["name"] for patch in report["patches"] if patch["state"] == "applied"}
    for line in lines(acting, preprocessing):
        print(line)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speculators_qwen_compat")
    commands = parser.add_subparsers(dest="command", required=True)
    status_parser = commands.add_parser("status", help="which fixes apply to this venv, and why")
    status_parser.add_argument("--json", action="store_true", help="machine-readable output")
    status_parser.add_argument(
        "--route",
        action="store_true",
        help="the upstream functions a prepare_data row passes, in order, and the fixes at each",
    )
    doctor_parser = commands.add_parser(
        "doctor", help="what the model's template demands, how masks will be made, a dry run"
    )
    from speculators_qwen_compat.doctor import command as doctor

    doctor.add_arguments(doctor_parser)
    from speculators_qwen_compat.acceptance import command as acceptance

    acceptance.add_arguments(
        commands.add_parser("acceptance", help="a served drafter's acceptance on your data")
    )
    repair_parser = commands.add_parser(
        "repair-drafter", help="a copy of a saved drafter whose config vLLM serves as it trained"
    )
    from speculators_qwen_compat.doctor import repair_drafter

    repair_drafter.add_arguments(repair_parser)
    args = parser.parse_args(argv)
    if args.command == "acceptance":
        return acceptance.main(args)
    if args.command == "doctor":
        return doctor.main(args)
    if args.command == "repair-drafter":
        return repair_drafter.main(args)
    if args.command == "status":
        report = status_report()
        if args.route:
            return _print_route(report)
        elif args.json:
            print(json.dumps(report, indent=2))
        else:
            _print_status(report)
    return 0


if __name__ == "__main__":
    with compile_on_first_call():  # status and doctor import upstream and compile nothing
        code = main()
    frozen_imports.exit_with(code)
