"""Lay out one speculators release's source the way the upstream repository has it.

The diffs under ``patches/<release>/`` are written against upstream's layout (``src/speculators``),
and the wheel on PyPI holds the same package files. This downloads the wheel once
(``pip download --no-deps``, cached in ``build/upstream-wheels/``) and unpacks its
``speculators/`` package to ``<destination>/src/speculators/``::

    python tools/release_source.py 0.9.0 build/src-0.9.0          # pristine source
    python tools/release_source.py 0.9.0 build/src-0.9.0 --git    # ... committed in a scratch repo
    python tools/release_source.py 0.9.0 build/src-0.9.0 --apply  # ... with patches/0.9.0 applied

``--installed`` copies the package of the speculators importable here instead (a release venv
holds the wheel's files unchanged), so nothing is downloaded; the tests use that.

``--git`` makes the destination its own git repository (pristine tree committed), which is how a
patch is edited: apply the earlier ones, change the file, ``git diff > patches/...``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "build" / "upstream-wheels"
PATCHES = ROOT / "patches"
PACKAGE = "speculators"


def wheel_path(release: str, cache: Path = CACHE) -> Path:
    """The release's wheel, downloaded into ``cache`` on first use."""
    name = f"{PACKAGE}-{release}-py3-none-any.whl"
    wheel = cache / name
    if wheel.is_file():
        return wheel
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
        requirement = f"{PACKAGE}=={release}"
        subprocess.run(
            [*pip, "download", "--no-deps", "--only-binary=:all:", requirement, "-d", scratch],
            check=True,
        )
        downloaded = Path(scratch) / name
        if not downloaded.is_file():
            found = ", ".join(p.name for p in Path(scratch).iterdir()) or "nothing"
            raise FileNotFoundError(f"pip download gave {found}, not {name}")
        downloaded.replace(wheel)  # same filesystem: the cache never holds half a wheel
    return wheel


def lay_out(
    release: str,
    destination: Path,
    *,
    git: bool = False,
    cache: Path = CACHE,
    installed: Path | None = None,
) -> Path:
    """Unpack the release's package to ``destination/src/speculators``; returns ``destination``.

    The destination must not exist yet or be empty. With ``installed`` (the folder of an
    installed ``speculators`` package of this release) its files are copied, byte for byte the
    wheel's, and nothing is downloaded. With ``git``, it becomes a repository with the pristine
    tree committed (``git apply`` then resolves paths from its root, never from an enclosing
    repository's).
    """
    destination.mkdir(parents=True, exist_ok=True)
    if any(destination.iterdir()):
        raise FileExistsError(f"{destination} is not empty")
    if installed is not None:
        shutil.copytree(
            installed,
            destination / "src" / PACKAGE,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
    else:
        _unpack_wheel(wheel_path(release, cache), destination)
    if git:
        _git(destination, "init", "--quiet")
        _git(destination, "add", "--all")
        _git(destination, "commit", "--quiet", "--message", f"{PACKAGE} {release} (PyPI wheel)")
    return destination


def _unpack_wheel(wheel_file: Path, destination: Path) -> None:
    prefix = f"{PACKAGE}/"
    with zipfile.ZipFile(wheel_file) as wheel:
        for member in wheel.infolist():
            if member.is_dir() or not member.filename.startswith(prefix):
                continue
            target = destination / "src" / member.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            with wheel.open(member) as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst)


def release_patches(release: str, patches: Path = PATCHES) -> list[Path]:
    """The release's patches in the order they apply (their NNNN- prefix)."""
    return sorted((patches / release).glob("[0-9][0-9][0-9][0-9]-*.patch"))


def apply_patches(source: Path, patch_files: list[Path]) -> None:
    """``git apply --check`` then ``git apply`` each patch at the root of ``source``, in order."""
    for patch in patch_files:
        _git(source, "apply", "--check", str(patch))
        _git(source, "apply", str(patch))


def _git(cwd: Path, *args: str) -> None:
    identity = ["-c", "user.name=release_source", "-c", "user.email=release_source@localhost"]
    subprocess.run(["git", *identity, *args], cwd=cwd, check=True)


def importable_package(parser: argparse.ArgumentParser) -> Path:
    """The folder of the speculators package this Python imports (``--installed``)."""
    import importlib.util

    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        parser.error("speculators is not importable here")
    return Path(next(iter(spec.submodule_search_locations)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("release", help="speculators release, e.g. 0.9.0")
    parser.add_argument("destination", type=Path, help="new (or empty) folder")
    parser.add_argument("--git", action="store_true", help="commit the pristine tree in a repo")
    parser.add_argument("--apply", action="store_true", help="apply patches/<release>/ in order")
    parser.add_argument(
        "--installed", action="store_true", help="copy the importable speculators, no download"
    )
    args = parser.parse_args(argv)
    installed = importable_package(parser) if args.installed else None
    lay_out(args.release, args.destination, git=args.git or args.apply, installed=installed)
    if args.apply:
        patch_files = release_patches(args.release)
        if not patch_files:
            parser.error(f"no patches in {PATCHES / args.release}")
        apply_patches(args.destination, patch_files)
    print(args.destination / "src" / PACKAGE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
