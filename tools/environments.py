"""The test environments (envs/environments.toml), built with uv, and this checkout's venvs.

Usage: python tools/environments.py build NAME... | wheel | install cpu|vision
Where: $VENVS, else the checkout's .venvs (a link to ~/.cache/speculators-qwen-compat/envs).
NAME is a link to ``.store/NAME-HASH`` (HASH: its recipe, this builder, the Python, the sources),
built in a scratch folder, checked (a failed install or import, or torch in a folder, fails it
and replaces nothing), renamed into the store, then the link swapped: an environment is absent
or whole, and a run reading an old store folder is undisturbed; two runs wanting one recipe
build it once (a lock per store name in ``.locks``: the second waits). A folder's base builds
in a thread beside its installs (``--target`` ignores the interpreter's packages). ``rel/main``:
the newest release's folder with upstream's main ($SPECULATORS_GIT: git URL[@REF] or a local
checkout).
``install BASE``: build/venv-BASE, this package's wheel (not editable) in a venv whose
``00_base_venv.pth`` adds the shared base's site-packages: a checkout never writes into a base.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import tomllib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import uv  # noqa: E402

TABLE = ROOT / "envs" / "environments.toml"
WHEELS = ROOT / "build" / "wheel"
UPSTREAM = "git+https://github.com/vllm-project/speculators@main"
PYTHON = getattr(sys, "_base_executable", sys.executable)


class BuildError(Exception): ...  # a build step failed: the scratch folder goes, nothing replaced


def fail(message: str) -> NoReturn:
    print(f"speculators_qwen_compat: error: {message}", file=sys.stderr)
    sys.exit(1)


def table() -> dict:
    return tomllib.loads(TABLE.read_text(encoding="utf-8"))


def folder() -> Path:
    """The environments' real folder ($VENVS, or the checkout's .venvs link, made when missing)."""
    link, where = ROOT / ".venvs", Path(os.environ.get("VENVS") or ROOT / ".venvs")
    shared = uv.CACHE / "envs"
    if link.is_symlink() and Path(os.readlink(link)) == shared.with_name("venvs"):
        link.unlink()  # made by the pip-based tools: that folder's layout is not this one
    if where == link and not link.is_symlink() and not link.exists():
        shared.mkdir(parents=True, exist_ok=True)
        link.symlink_to(shared)
    where.mkdir(parents=True, exist_ok=True)
    return where.resolve()


def spec_of(name: str) -> dict:
    envs = table()["env"]
    if name in envs:
        return envs[name]
    if name == "rel/main":
        numbered = [n for n in envs if re.fullmatch(r"rel/\d+(\.\d+)+", n)]
        newest = envs[max(numbered, key=lambda n: tuple(map(int, n[4:].split("."))))]
        main = f"speculators @ {upstream_source(os.environ.get('SPECULATORS_GIT') or UPSTREAM)}"
        no_deps = [main if p.startswith("speculators==") else p for p in newest["no_deps"]]
        return {**newest, "no_deps": no_deps}
    fail(f"no environment {name} in {TABLE.relative_to(ROOT)}")


def upstream_source(source: str) -> str:
    """A git source pinned to its commit (the hash of rel/main then follows upstream's main)."""
    source = f"file://{Path(source).resolve()}" if Path(source).is_dir() else source
    tail = source.rpartition("/")[2]  # git+ssh://git@host/x: that @ is not a ref
    url, _, ref = (
        source.removeprefix("git+").rpartition("@") if "@" in tail else (source, 0, "HEAD")
    )
    listed = subprocess.run(["git", "ls-remote", url.removeprefix("git+"), ref],
                            capture_output=True, text=True)  # fmt: skip
    found = listed.stdout.split() if listed.returncode == 0 else []
    if not found:
        fail(f"no {ref} at {url}: set SPECULATORS_GIT to a git URL@branch or a local checkout")
    return f"git+{url}@{found[0]}"


def digest(spec: dict, common: list[str]) -> str:
    script = "".join(Path(p).read_text() for p in (__file__, uv.__file__))
    script += (ROOT / spec["script"]).read_text() if "script" in spec else ""
    recipe = [spec, common if spec.get("common") else [], script, sys.version, uv.source_args()]
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def build(name: str, spec: dict | None = None) -> Path:
    """NAME's environment, built when its hash changed; the resolved folder."""
    data = table()
    spec = spec or spec_of(name)
    venvs = folder()
    link = venvs / name
    store = venvs / ".store" / f"{name.replace('/', '-')}-{digest(spec, data['common'])}"
    if not store.is_dir():  # a built store is only read: a read-only or shared folder serves
        (venvs / ".locks").mkdir(exist_ok=True)
        with locked(venvs / ".locks" / store.name, name):
            if not store.is_dir():
                store.parent.mkdir(parents=True, exist_ok=True)
                scratch = Path(tempfile.mkdtemp(".tmp", f"{store.name}.", store.parent))
                scratch.chmod(0o755)
                try:
                    make(scratch, spec, data)
                    scratch.rename(store)  # (built meanwhile where locks do not reach: fails)
                except BaseException as error:  # killed or failed: no scratch folder is left
                    shutil.rmtree(scratch, ignore_errors=True)
                    if not isinstance(error, (BuildError, OSError)):
                        raise
                    fail(f"could not build {name} ({error}): nothing was replaced")
                print(f"built {name} ({store})", flush=True)
    if "over" in spec:
        build(spec["over"])  # current, and its link in place (a run needs both)
    if link.exists() and not link.is_symlink():  # a real folder: never replaced
        fail(f"{link} was built by the pip-based tools: set VENVS to another folder or move it")
    if not link.is_symlink() or link.resolve() != store:
        link.parent.mkdir(parents=True, exist_ok=True)
        swap = link.with_name(f".{link.name}.{os.getpid()}.{threading.get_native_id()}")
        swap.symlink_to(os.path.relpath(store, link.parent))
        swap.replace(link)
    return store


@contextlib.contextmanager
def locked(path: Path, name: str) -> Iterator[None]:
    """Held while NAME builds: a run wanting the same recipe waits, then takes its folder."""
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another run's build of {name}", flush=True)
            fcntl.flock(descriptor, fcntl.LOCK_EX)
    except OSError as error:  # not ours to write, or no locks on this file system (NFS)
        fail(f"cannot lock {path} ({error}): set VENVS to a folder of yours on a local disk")
    try:
        yield
    finally:
        os.close(descriptor)


def run(command: list[str], **kwargs) -> None:
    if subprocess.run(command, **kwargs).returncode != 0:
        raise BuildError(f"{Path(command[0]).name} {command[1]} failed, see above")


def uv_command(*args: str) -> list[str]:
    return [uv.binary(table()["uv"]), *args]


def make(scratch: Path, spec: dict, data: dict) -> None:
    """Build one environment into ``scratch``: a venv, or a folder run over another."""
    env, sources = uv.environment(), uv.source_args()
    packages = [*spec.get("packages", []), *(data["common"] if spec.get("common") else [])]
    over = spec.get("over")
    if over is None:
        run(uv_command("venv", "-q", "--relocatable", "--python", PYTHON, str(scratch)), env=env)
        python, target, check_env = scratch / "bin" / "python", [], dict(os.environ)
    else:  # the base builds beside the folder's installs, which take the plain interpreter
        base = ThreadPoolExecutor(1).submit(build, over)  # (its thread is joined at exit)
        python, site = Path(PYTHON), scratch / "site-packages"
        target = ["--target", str(site)]
        check_env = {**os.environ, "PYTHONPATH": str(site)}
    pip = uv_command("pip", "install", "-q", "--python", str(python), *target, *sources)
    if packages:
        run([*pip, *packages], env=env)
    if spec.get("no_deps"):
        run([*pip, "--no-deps", *spec["no_deps"]], env=env)
    better = uv.better_wheels(site if over else next(scratch.glob("lib/python3*/site-packages")))
    if better:  # uv took a wheel tagged for an older Python from the first source holding it
        run([*pip, "--no-deps", "--reinstall", *better], env=env)
    if spec.get("remove"):
        uninstall = uv_command("pip", "uninstall", "-q", "--python", str(python), *target)
        run([*uninstall, *spec["remove"]], env=env)
    if over is not None:
        if (site / "torch").exists():
            raise BuildError("the folder holds torch, which would shadow the base's: fix it")
        for script in (site / "bin").glob("*"):  # the venv first on PATH runs them
            text = script.read_text(errors="surrogateescape")
            head, _, body = text.partition("\n")
            if text.startswith("#!/bin/sh\n'''exec'"):  # uv's form for a long or spaced path
                head, _, body = text.partition("\n' '''\n")
            if head.startswith("#!") and "python" in head:  # the plain interpreter's
                script.write_text(f"#!/usr/bin/env python\n{body}", errors="surrogateescape")
        if spec.get("check_alone"):  # the stdlib and the folder only (-S): no base needed
            quiet = {**check_env, "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}  # "no PyTorch"
            run([PYTHON, "-S", "-c", f"import {', '.join(spec['check_alone'])}"], env=quiet)
        python = base.result() / "bin" / "python"
    if "script" in spec:
        run([str(python), str(ROOT / spec["script"]), str(scratch)])
    if spec.get("check"):
        run([str(python), "-c", f"import {', '.join(spec['check'])}"], env=check_env)


def wheel() -> None:
    """This package's wheel into build/wheel (uv build, isolated, the machine's sources)."""
    shutil.rmtree(WHEELS, ignore_errors=True)
    command = uv_command("build", "-q", "--wheel", "--out-dir", str(WHEELS), str(ROOT))
    if subprocess.run([*command, *uv.source_args(build=True)], env=uv.environment()).returncode:
        fail("could not build this package's wheel (above)")


def install(base: str) -> None:
    """build/venv-BASE: this package's wheel over the shared base venv (see the docstring)."""
    base_dir = build(f"base-{base}")
    wheels = sorted(WHEELS.glob("speculators_qwen_compat-*.whl"))
    if len(wheels) != 1:
        fail(f"expected one wheel in {WHEELS}, found {len(wheels)}: run make wheel")
    venv = ROOT / "build" / f"venv-{base}"  # build/ exists: the wheel is in it
    with locked(Path(f"{venv}.lock"), venv.name):  # one install at a time per checkout
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run(uv_command("venv", "-q", "--python", PYTHON, str(venv)), check=True)
        sites = [next((d / "lib").glob("python3*/site-packages")) for d in (venv, base_dir)]
        (sites[0] / "00_base_venv.pth").write_text(f"import site; site.addsitedir('{sites[1]}')\n")
        for script in (base_dir / "bin").iterdir():  # relocatable: they run the python beside them
            if not (venv / "bin" / script.name).exists() and not script.name.startswith("activate"):
                shutil.copy2(script, venv / "bin" / script.name)
        pip = uv_command("pip", "install", "-q", "--python", str(venv / "bin" / "python"))
        subprocess.run([*pip, "--no-deps", str(wheels[0])], check=True)
    check = [str(venv / "bin" / "python"), "-c", "import speculators_qwen_compat, wrapt"]
    if subprocess.run(check).returncode != 0:
        fail(f"{venv} cannot import this package and the base's wrapt: see the lines above")
    print(f"installed {wheels[0].name} into {venv} (over {base_dir})")


def main(argv: list[str]) -> int:
    if argv[:1] == ["build"]:
        for name in argv[1:]:
            build(name)
    elif argv == ["wheel"]:
        wheel()
    elif argv in (["install", "cpu"], ["install", "vision"]):
        install(argv[1])
    else:
        sys.exit("usage: tools/environments.py build NAME... | wheel | install cpu|vision")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
