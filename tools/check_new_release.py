"""Is there a speculators release newer than the table, and what does it do to the fixes?

Asks PyPI (``pip index versions speculators``) for versions newer than the newest release in
speculators_qwen_compat/releases.py; for each, builds ``rel/<version>`` from the newest tested
release's entry in envs/environments.toml (hs-connectors of the same version when it exists),
runs the suite, and prints per fix: broke (failed, or a target that no longer fits), no longer
needed (a pin test says the problem is gone), or still applies.
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

import environments  # noqa: E402
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


def spec_for(version: str, newest: str) -> dict:
    """The newest tested release's environment, with ``version``'s speculators (and its
    hs-connectors when PyPI has that version)."""
    spec = environments.spec_of(f"rel/{newest}")
    same = Version(version) in published_versions("hs-connectors")
    pins = {"speculators": True, "hs-connectors": same}
    no_deps = [
        f"{p.split('==')[0]}=={version}" if pins.get(p.split("==")[0]) else p
        for p in spec["no_deps"]
    ]
    return {**spec, "no_deps": no_deps}


def check(version: str, newest: str) -> bool:
    environments.build(f"rel/{version}", spec_for(version, newest))
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
