"""tools/environments.py and tools/uv.py: what the test environments' safety rests on (issue 36).

- pip's own settings (files, then PIP_* variables over them) reach uv: a real ``pip config list``
  reads a config file written here, and the flags handed to uv carry its values.
- an environment is absent or whole: a build whose check fails leaves no link and no store folder
  and says so in one line; a build that succeeds is a link to a store folder, reused while its
  recipe is the same; a changed recipe is a new store folder, and the old one stays as it was
  for a run still reading it. Real uv venvs (no package downloads: empty venvs).
- two runs wanting one recipe at once build it once: the second waits for the first's folder.
- a folder's ``check_alone`` sees nothing but the folder and the stdlib, ``check`` the built
  base's packages too; a failed check leaves no folder and no link.
- with several package sources the wheel this Python ranks best among all of them is installed,
  as pip does (uv alone takes the first source's): two local indexes, a real uv.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.pure  # release-independent: run once (tools/matrix.py)

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "tools"))


def _pairs(args: list[str]) -> list[tuple[str, str]]:
    return list(zip(args[::2], args[1::2], strict=True))


def test_pip_settings_reach_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uv = _load("uv")
    config = tmp_path / "pip.conf"
    config.write_text(
        "[global]\nextra-index-url =\n    file:///idx/one\n    file:///idx/two\n"  # pip's list form
        "constraint = /caps.txt\nfind-links = /from-file\n"
    )
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    monkeypatch.setenv("PIP_FIND_LINKS", "/from-env")  # a variable overrides the file
    settings = uv.pip_settings()
    pairs = _pairs(uv.source_args(settings))
    assert ("--extra-index-url", "file:///idx/one") in pairs
    assert ("--extra-index-url", "file:///idx/two") in pairs
    assert ("--constraint", "/caps.txt") in pairs
    assert ("--find-links", "/from-env") in pairs and ("--find-links", "/from-file") not in pairs
    assert ("--index-strategy", "unsafe-best-match") in pairs
    assert ("--build-constraints", "/caps.txt") in _pairs(uv.source_args(settings, build=True))


def test_an_environment_is_absent_or_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    environments = _load("environments")
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("VENVS", str(venvs))
    with pytest.raises(SystemExit) as stopped:
        environments.build("broken", {"check": ["no_such_module_anywhere"]})
    assert stopped.value.code == 1
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("speculators_qwen_compat: error: could not build broken")
    assert not (venvs / "broken").exists() and not (venvs / "broken").is_symlink()
    assert list((venvs / ".store").iterdir()) == []  # the scratch folder went too

    first = environments.build("plain", {"check": ["json"]})
    assert (venvs / "plain").resolve() == first and (first / "bin" / "python").exists()
    marker = first / "untouched"
    marker.write_text("a run reads this")
    assert environments.build("plain", {"check": ["json"]}) == first  # current: reused
    second = environments.build("plain", {"check": ["json", "csv"]})  # a new recipe
    assert second != first and (venvs / "plain").resolve() == second
    assert marker.read_text() == "a run reads this"  # the old store folder stays whole


def test_two_runs_build_one_recipe_once(tmp_path: Path) -> None:
    """A second run starts while the first is building the same recipe: it says it waits, then
    takes the first's folder (without the lock both would build, and both would say so). The
    first's build holds until the second has said it waits: no timing is assumed."""
    go = tmp_path / "go"
    slow = tmp_path / "slow.py"
    slow.write_text(
        f"import pathlib, sys, time\ndeadline = time.monotonic() + 30\n"
        f"while not pathlib.Path({str(go)!r}).exists() and time.monotonic() < deadline:\n"
        f"    time.sleep(0.05)\nopen(sys.argv[1] + '/made', 'a').write('x')\n"
    )
    call = (
        f"import sys; sys.path.insert(0, {str(ROOT / 'tools')!r}); import environments; "
        f"print(environments.build('slow', {{'script': {str(slow)!r}}}))"
    )
    env = {**os.environ, "VENVS": str(tmp_path / "venvs")}
    store = tmp_path / "venvs" / ".store"

    def start() -> subprocess.Popen:
        command = [sys.executable, "-c", call]
        return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)

    first = start()
    deadline = time.monotonic() + 120
    while not (store.is_dir() and any(store.glob("*.tmp"))):  # the first is building
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    second = start()
    said = second.stdout.readline().strip()
    go.write_text("")
    outs = [run.communicate(timeout=120)[0].splitlines() for run in (first, second)]
    assert said == "waiting for another run's build of slow"
    assert [run.returncode for run in (first, second)] == [0, 0]
    assert outs[0][0].startswith("built slow") and len(outs[1]) == 1  # the second built nothing
    assert outs[0][-1] == outs[1][-1]  # the same store folder
    assert (Path(outs[0][-1]) / "made").read_text() == "x"  # its script ran once
    assert [p.name for p in store.iterdir()] == [Path(outs[0][-1]).name]


def test_a_folder_is_checked_alone_then_over_its_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """``check_alone`` sees the stdlib and the folder, not the base's packages nor the plain
    interpreter's (-S: pip); ``check`` sees the base's. A failed check leaves no folder, no link."""
    environments = _load("environments")
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("VENVS", str(venvs))
    only_in_base = tmp_path / "only_in_base.py"  # the base's script puts a module in its venv
    only_in_base.write_text(
        "import pathlib, sys, sysconfig\n"
        "pathlib.Path(sysconfig.get_paths()['purelib'], 'only_in_base.py').write_text('')\n"
    )
    plain = [environments.PYTHON, "-c", "import pip"]
    assert subprocess.run(plain).returncode == 0  # pip, which -S must hide (tools/uv.py uses it)
    bases = {"base": {"script": str(only_in_base)}}
    monkeypatch.setattr(environments, "spec_of", bases.__getitem__)
    for alone in (["only_in_base"], ["pip"]):
        with pytest.raises(SystemExit):
            environments.build("folder", {"over": "base", "check_alone": alone})
        assert "could not build folder" in capsys.readouterr().err
        assert not (venvs / "folder").is_symlink()
        assert not [p for p in (venvs / ".store").iterdir() if p.name.startswith("folder")]
    folder = {"over": "base", "check_alone": ["json"], "check": ["only_in_base"]}
    built = environments.build("folder", folder)
    assert (venvs / "folder").resolve() == built and (venvs / "base" / "bin" / "python").exists()


def _index(root: Path, tag: str) -> str:
    """A PEP 503 index in ``root`` holding only ``tagpick 1.0``'s wheel for ``tag``; its module
    says which wheel it came from."""
    name = f"tagpick-1.0-{tag}-none-any.whl"
    files = root / "files"
    files.mkdir(parents=True)
    wheel_meta = f"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: {tag}-none-any\n"
    contents = {
        "tagpick.py": f"TAG = {tag!r}\n",
        "tagpick-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tagpick\nVersion: 1.0\n",
        "tagpick-1.0.dist-info/WHEEL": wheel_meta,
    }
    record = "".join(f"{path},,\n" for path in contents) + "tagpick-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(files / name, "w") as archive:
        for path, text in {**contents, "tagpick-1.0.dist-info/RECORD": record}.items():
            archive.writestr(path, text)
    page = root / "simple" / "tagpick"
    page.mkdir(parents=True)
    (page / "index.html").write_text(f'<a href="../../files/{name}">{name}</a>\n')
    return (root / "simple").as_uri()


def test_the_best_tag_among_every_source_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip takes the wheel this Python ranks best among every source's; uv takes the first
    source's (here the older-Python one), and the build puts the best one back."""
    environments = _load("environments")
    newer = _index(tmp_path / "newer", f"py3{sys.version_info.minor}")
    older = _index(tmp_path / "older", f"py3{sys.version_info.minor - 1}")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no machine settings: these two only
    monkeypatch.setenv("PIP_INDEX_URL", newer)
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", older)
    monkeypatch.setenv("VENVS", str(tmp_path / "venvs"))
    environments.uv.pip_settings.cache_clear()
    plain = tmp_path / "plain"
    uv_bin = environments.uv_command()[0]
    subprocess.run([uv_bin, "venv", "-q", "--python", sys.executable, str(plain)], check=True)
    subprocess.run([uv_bin, "pip", "install", "-q", "--python", str(plain / "bin" / "python"),
                    *environments.uv.source_args(), "tagpick==1.0"], check=True)  # fmt: skip
    assert _tag_in(plain) == f"py3{sys.version_info.minor - 1}"  # uv alone: the first source's
    built = environments.build("picked", {"packages": ["tagpick==1.0"], "check": ["tagpick"]})
    assert _tag_in(built) == f"py3{sys.version_info.minor}"


def _tag_in(venv: Path) -> str:
    out = subprocess.run([str(venv / "bin" / "python"), "-c", "import tagpick; print(tagpick.TAG)"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return out.stdout.strip()


def test_an_empty_venvs_means_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """``make VENVS= demo`` (an empty value) uses the checkout's .venvs in the Makefile, in
    tools/environments.py and in tools/release_python.sh alike, never the current folder (it
    once built a ``.store`` into the checkout and then looked for the release in ``.venvs``)."""
    environments = _load("environments")
    monkeypatch.delenv("VENVS", raising=False)
    default = environments.folder()
    monkeypatch.setenv("VENVS", "")
    assert environments.folder() == default
    dry = subprocess.run(["make", "-n", "-C", str(ROOT), "VENVS=", "lint"], capture_output=True,
                         text=True, check=True, env={**os.environ, "VENVS": ""})  # fmt: skip
    assert ".venvs/tools/bin/ruff check" in dry.stdout, dry.stdout
    assert " /tools/bin/ruff" not in dry.stdout
    # ... and not handed down as a relative folder: the commands find the default themselves
    shown = subprocess.run(["make", "-s", "-C", str(ROOT), "VENVS=", "--eval",
                            'shown-venvs: ; @echo "[$${VENVS-unset}]"', "shown-venvs"],
                           capture_output=True, text=True, check=True,
                           env={**os.environ, "VENVS": ""})  # fmt: skip
    assert shown.stdout.strip() == "[unset]", shown.stdout
