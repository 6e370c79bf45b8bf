"""The pinned uv, and the machine's package sources handed to it.

Target: tools/environments.py (every test environment, the checkout's venvs) on a machine with
nothing but Python 3.11 and pip. Why: uv resolves, links from one cache and is safe to run side
by side, but it reads no pip configuration, and this machine takes torch's CPU wheels through pip's
(find-links, extra indexes, a constraints file): without them uv would download multi-GB CUDA
builds of torch from PyPI. The pins of ``envs/environments.toml`` (its ``uv``) say which uv.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: The Python whose pip is asked (a venv made by uv has no pip: its base interpreter's)
PYTHON = getattr(sys, "_base_executable", sys.executable)
#: pip's option -> uv's flag; each value of a pip option may hold several entries.
FLAGS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
}


def binary(version: str) -> str:
    """A uv of ``version``: the one on PATH when it is that version (CI's setup-uv), otherwise
    one installed once with pip into the user's cache (``pip install --target``)."""
    found = shutil.which("uv")
    if found and _version(found) == version:
        return found
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    home = cache / "speculators-qwen-compat" / f"uv-{version}"
    uv = home / "bin" / "uv"
    if not uv.is_file():
        home.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f"uv-{version}.", dir=home.parent))
        pip = [PYTHON, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, "--target", str(scratch), f"uv=={version}"], check=True)
        try:
            scratch.rename(home)  # whole or absent; a concurrent bootstrap may have won
        except OSError:
            shutil.rmtree(scratch, ignore_errors=True)
    return str(uv)


def _version(uv: str) -> str:
    out = subprocess.run([uv, "--version"], capture_output=True, text=True).stdout.split()
    return out[1] if len(out) > 1 else ""


def pip_settings() -> dict[str, str]:
    """pip's effective settings (``pip config list``: files, then PIP_* variables over them)."""
    out = subprocess.run(
        [PYTHON, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout  # fmt: skip
    found: dict[str, dict[str, str]] = {}
    for line in out.splitlines():
        name, _, value = line.partition("=")
        section, _, key = name.rpartition(".")
        found.setdefault(key, {})[section] = value.strip().strip("'\"")
    order = (":env:", "install", "global")
    return {k: next(v[s] for s in (*order, *v) if s in v) for k, v in found.items()}


def source_args(settings: dict[str, str] | None = None, build: bool = False) -> list[str]:
    """uv flags for the indexes, find-links and constraints pip is configured with (for ``uv
    build``: constraints on the build requirements). Several sources: every one is searched for
    the best version (pip's rule), so a pinned torch takes the local CPU build (2.13.0+cpu sorts
    above PyPI's 2.13.0) instead of a CUDA one. Unlike pip, uv may take a wheel of that version
    with a lower Python tag from an earlier source (multiprocess: /opt/pypi's py310 wheel, whose
    fork_exec call fails on 3.11.7, over /opt/pypi-more's py311)."""
    settings = pip_settings() if settings is None else settings
    args: list[str] = []
    for option, flag in FLAGS.items():
        flag = "--build-constraints" if build and option == "constraint" else flag
        for entry in settings.get(option, "").split():
            args += [flag, entry]
    if any(flag in args for flag in ("--extra-index-url", "--find-links")):
        args += ["--index-strategy", "unsafe-best-match"]
    return args


def environment(settings: dict[str, str] | None = None) -> dict[str, str]:
    """The process environment for uv: pip's certificate bundle, when set, for uv too."""
    settings = pip_settings() if settings is None else settings
    env = dict(os.environ)
    if settings.get("cert") and "SSL_CERT_FILE" not in env:
        env["SSL_CERT_FILE"] = settings["cert"]
    return env
