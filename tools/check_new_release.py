"""Is there a speculators release newer than the table, and what does it do to the fixes?

Asks PyPI (``pip index versions speculators``) for versions newer than the newest release in
speculators_qwen_compat/releases.py; for each, builds ``.venvs/<version>`` from the newest
tested release's requirements (hs-connectors pinned to the same version when it exists),
installs this package's wheel, runs the suite, and prints per fix: broke (failed, or a target
that no longer fits), no longer needed (a pin test says the problem is gone), or still applies.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from matrix import fix_states, run_suite  # noqa: E402

from speculators_qwen_compat.core.releases import TESTED_RELEASES  # noqa: E402

RETIRE = re.compile(r"AssertionError: (.*can be retired.*|.*may be retired.*)")


def published_versions(package: str) -> list[Version]:
    out = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", package],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    match = re.search(r"Available versions: (.*)", out.stdout)
    return sorted(Version(v) for v in match.group(1).split(", ")) if match else []


def requirements_for(version: str, newest: str) -> Path:
    text = (ROOT / "envs" / f"{newest}.txt").read_text()
    if Version(version) in published_versions("hs-connectors"):
        text = re.sub(r"hs-connectors==\S+", f"hs-connectors=={version}", text)
    path = ROOT / "envs" / f".new-{version}.txt"
    path.write_text(text)
    return path


def check(version: str, newest: str) -> bool:
    requirements = requirements_for(version, newest)
    try:
        build = str(ROOT / "tools" / "build_venv.sh")
        subprocess.run([build, "release", version, str(requirements)], check=True)
    finally:
        requirements.unlink()
    passed, summary = run_suite(version, [])
    states = fix_states(version)
    log = (ROOT / "build" / "parts" / f"suite-{version}.log").read_text()
    retire = sorted(set(RETIRE.findall(log)))
    declared = TESTED_RELEASES[newest].fixes
    print(f"speculators {version}: suite {'passed' if passed else 'FAILED'} ({summary})")
    for fix, state in states.items():
        if state in ("failed", "not-applicable"):
            verdict = f"BROKE ({state}; was {declared.get(fix)} on {newest})"
        elif state == "not-needed":
            verdict = "not needed"
        else:
            verdict = "still applies"
        print(f"  {fix:<16} {verdict}")
    for message in retire:
        print(f"  no longer needed: {message}")
    return passed


def main() -> int:
    newest = max(TESTED_RELEASES, key=Version)
    newer = [str(v) for v in published_versions("speculators") if v > Version(newest)]
    if not newer:
        print(f"no speculators release newer than {newest} on PyPI")
        return 0
    results = [check(version, newest) for version in newer]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
