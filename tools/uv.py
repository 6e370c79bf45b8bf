"""The pinned uv (``envs/environments.toml``), and the machine's package sources handed to it.

Target: tools/environments.py on a machine with nothing but Python 3.11 and pip. Why: uv reads
no pip configuration, and this machine takes torch's CPU wheels through pip's (find-links, extra
indexes, a constraints file): without them uv would download multi-GB CUDA builds from PyPI.
"""

from __future__ import annotations

import ast
import base64
import contextlib
import functools
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

try:
    from packaging import tags, utils
except ImportError:  # a bare interpreter: pip's own copy
    from pip._vendor.packaging import tags, utils  # type: ignore[no-redef]

PYTHON = getattr(sys, "_base_executable", sys.executable)  # uv's venvs have no pip: the base's
#: this project's per-user cache: the bootstrapped uv, the environments (tools/environments.py)
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "speculators-qwen-compat"
DEFAULT_INDEX = "https://pypi.org/simple"  # pip's and uv's when no index-url is set
#: pip's option -> uv's flag; each value of a pip option may hold several entries.
FLAGS = {o: f"--{o}" for o in ("index-url", "extra-index-url", "find-links", "constraint")}


def binary(version: str) -> str:
    """A uv of ``version``: the one on PATH when it is that version (CI's setup-uv), otherwise
    one installed once with pip into the user's cache (``pip install --target``)."""
    found = shutil.which("uv")
    said = subprocess.run([found, "-V"], capture_output=True, text=True).stdout if found else ""
    if said.split()[:2] == ["uv", version]:
        return found
    home = CACHE / f"uv-{version}"
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


@functools.cache
def pip_settings() -> dict[str, str]:
    """pip's effective settings (``pip config list``: files, then PIP_* variables over them)."""
    out = subprocess.run(
        [PYTHON, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout  # fmt: skip
    found: dict[str, dict[str, str]] = {}
    for line in out.splitlines():
        name, _, value = line.partition("=")
        section, _, key = name.rpartition(".")
        with contextlib.suppress(ValueError, SyntaxError):  # pip prints repr(): "'a\\nb'"
            value = ast.literal_eval(value.strip())
        found.setdefault(key, {})[section] = str(value).strip().strip("'\"")
    order = (":env:", "install", "global")
    return {k: next(v[s] for s in (*order, *v) if s in v) for k, v in found.items()}


def source_args(settings: dict[str, str] | None = None, build: bool = False) -> list[str]:
    """uv flags for pip's indexes, find-links and constraints (``build``: on build requirements).
    Every source is searched for the best version, as pip does (2.13.0+cpu sorts above PyPI's
    2.13.0); a wheel of it with a lower Python tag from an earlier source: ``better_wheels``."""
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
    cert = {"SSL_CERT_FILE": settings["cert"]} if settings.get("cert") else {}
    return {**cert, **os.environ}  # an SSL_CERT_FILE already set wins


def better_wheels(site: Path, settings: dict[str, str] | None = None) -> list[str]:
    """Wheels the sources offer for a version in ``site`` with a tag this Python ranks above the
    installed one's. uv takes a version's files from the first source holding it; pip takes the
    best tag among all sources (one index with multiprocess' py310 wheel, whose ``fork_exec``
    call fails on 3.11, another with its py311 one). Only pure wheels for an older Python
    (``py310-none``) are looked up: the case where sources differ."""
    settings = pip_settings() if settings is None else settings
    rank = {tag: i for i, tag in enumerate(tags.sys_tags())}
    older = re.compile(rf"(py|cp)3(?!{sys.version_info.minor}$)\d+")
    better = []
    for wheel in site.glob("*.dist-info/WHEEL"):
        lines = wheel.read_text(errors="replace").splitlines()
        have = [t for ln in lines if ln.startswith("Tag:") for t in tags.parse_tag(ln[4:].strip())]
        if not have or not all(older.fullmatch(t.interpreter) and t.abi == "none" for t in have):
            continue
        name, version = wheel.parent.name.removesuffix(".dist-info").rsplit("-", 1)
        best, url = min(rank.get(t, len(rank)) for t in have), None
        for found in _offered(utils.canonicalize_name(name), settings):
            file = urllib.parse.unquote(found.rsplit("/", 1)[-1])
            try:
                _, found_version, _, found_tags = utils.parse_wheel_filename(file)
            except utils.InvalidWheelFilename:
                continue
            score = min(rank.get(t, len(rank)) for t in found_tags)
            if str(found_version) == version and score < best:
                best, url = score, found
        if url:
            better.append(url)
    return better


def _offered(name: str, settings: dict[str, str]) -> list[str]:
    """Every file URL the configured indexes (PEP 503 pages) and find-links list for ``name``,
    yanked files left out; a source that cannot be read (but for a missing page) is an error:
    the build would otherwise keep a wheel pip would not have chosen."""
    indexes = settings.get("index-url", DEFAULT_INDEX).split()
    indexes += settings.get("extra-index-url", "").split()
    pages = [f"{index.rstrip('/')}/{name}/" for index in indexes if index]
    urls = []
    for link in settings.get("find-links", "").split():
        folder = Path(urllib.request.url2pathname(urllib.parse.urlsplit(link).path))
        if (folder if link.startswith("file:") else Path(link)).is_dir():
            folder = folder if link.startswith("file:") else Path(link)
            urls += [(folder / f).resolve().as_uri() for f in os.listdir(folder)]
        else:
            pages.append(link)
    for page in pages:
        local = Path(urllib.request.url2pathname(urllib.parse.urlsplit(page).path))
        if page.startswith("file:") and local.is_dir():
            page += "index.html"  # a local index's page for the package, as pip reads it
        parts = urllib.parse.urlsplit(page)
        shown = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()  # no password
        request = urllib.request.Request(shown)
        if parts.username:
            login = urllib.parse.unquote(f"{parts.username}:{parts.password or ''}").encode()
            request.add_header("Authorization", f"Basic {base64.b64encode(login).decode()}")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                text = response.read().decode(errors="replace")
        except Exception as error:  # urllib raises more than OSError (InvalidURL, IncompleteRead)
            reason = getattr(error, "reason", error)
            if getattr(error, "code", None) == 404 or isinstance(reason, FileNotFoundError):
                continue  # a source without the package
            raise OSError(f"cannot read {shown} to compare wheel tags: {error}") from error
        for anchor in re.findall(r"<a\s[^>]*>", text, re.I):
            href = re.search(r"""href\s*=\s*["']([^"']+)""", anchor)
            if href and "data-yanked" not in anchor:
                urls.append(urllib.parse.urljoin(shown, html.unescape(href.group(1)).split("#")[0]))
    return urls
