"""Session check (not CI): upstream's own data-preparation tests with the fixes off and on.

Usage: python tools/upstream_tests.py UPSTREAM_CHECKOUT RELEASE=REF [RELEASE=REF ...]
[--extra-path DIR]. UPSTREAM_CHECKOUT is a git clone of vllm-project/speculators (fetched by
the developer, never committed here); for each pair, ``tests/`` at REF is exported to
build/upstream/<ref>/ and ``tests/integration/datagen`` and ``tests/unit/data_generation`` run
against the installed RELEASE folder (tools/release_python.sh), offline, once with
``SPECULATORS_QWEN_COMPAT=0`` and once with the fixes on. ``--extra-path`` goes on PYTHONPATH
(upstream's tests import PIL, which the base venv does not hold). Prints, per release, the counts
and every test that passes without the fixes and fails with them, with its first error line.
Why: issue 14 asks that no upstream test passing without the fixes fail with them, except the
ones that pin a bug the fixes correct on purpose (docs/maintainers.md, "Upstream's contracts").
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITES = ("tests/integration/datagen", "tests/unit/data_generation")
INI = """[pytest]
markers =
    smoke: upstream marker
    sanity: upstream marker
    regression: upstream marker
    e2e: upstream marker
    slow: upstream marker
    multi_gpu: upstream marker
"""


def export(checkout: Path, ref: str) -> Path:
    """upstream's tests/ at REF, in a scratch folder."""
    target = ROOT / "build" / "upstream" / ref.replace("/", "-")
    subprocess.run(["rm", "-rf", str(target)], check=True)
    target.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(checkout), "archive", ref, "tests"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    (target / "pytest.ini").write_text(INI)
    return target


def outcomes(junit: Path) -> dict[str, tuple[str, str]]:
    """test id -> (passed/failed/error/skipped, first line of the failure)."""
    found = {}
    for case in ET.parse(junit).iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        state, detail = "passed", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                state = {"failure": "failed"}.get(tag, tag)
                detail = (node.get("message") or node.text or "").strip().splitlines()[:1]
                detail = detail[0][:160] if detail else ""
                break
        found[name] = (state, detail)
    return found


def run(release: str, folder: Path, mode: str, extra: str | None) -> dict[str, tuple[str, str]]:
    suites = [s for s in SUITES if (folder / s).is_dir()]
    junit = folder / f"junit-{mode}.xml"
    env = {**os.environ, "SPECULATORS_QWEN_COMPAT": mode, "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}  # fmt: skip
    if extra:
        env["PYTHONPATH"] = extra + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    command = [
        str(ROOT / "tools" / "release_python.sh"), release, "-P", "-m", "pytest", "-q",
        "-p", "no:cacheprovider", "-o", "addopts=", "-c", str(folder / "pytest.ini"),
        f"--rootdir={folder}", f"--junitxml={junit}", *suites,
    ]  # fmt: skip
    result = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    (folder / f"log-{mode}.txt").write_text(result.stdout + result.stderr)
    if not junit.is_file():
        raise SystemExit(f"upstream_tests: error: no results for {release} (see {folder})")
    return outcomes(junit)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path)
    parser.add_argument("pairs", nargs="+", help="RELEASE=REF")
    parser.add_argument("--extra-path")
    args = parser.parse_args(argv)
    rows = ["| release | upstream tests at | pass without fixes | pass with fixes | "
            "pass without, fail with |", "|---|---|---|---|---|"]  # fmt: skip
    details = []
    for pair in args.pairs:
        release, ref = pair.split("=", 1)
        folder = export(args.checkout, ref)
        off = run(release, folder, "0", args.extra_path)
        on = run(release, folder, "1", args.extra_path)
        passed_off = {t for t, (s, _) in off.items() if s == "passed"}
        passed_on = {t for t, (s, _) in on.items() if s == "passed"}
        lost = sorted(t for t in passed_off if on.get(t, ("missing", ""))[0] != "passed")
        rows.append(f"| {release} | {ref} | {len(passed_off)} of {len(off)} | "
                    f"{len(passed_on)} of {len(on)} | {len(lost)} |")  # fmt: skip
        details += [f"{release}: {t}: {on.get(t, ('missing', ''))[1]}" for t in lost]
    print("\n".join(rows))
    if details:
        print("\n" + "\n".join(details))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
