"""tools/environments.py and tools/uv.py: what the test environments' safety rests on (issue 36).

- pip's own settings (files, then PIP_* variables over them) reach uv: a real ``pip config list``
  reads a config file written here, and the flags handed to uv carry its values.
- an environment is absent or whole: a build whose check fails leaves no link and no store folder
  and says so in one line; a build that succeeds is a link to a store folder, reused while its
  recipe is the same; a changed recipe is a new store folder, and the old one stays as it was
  for a run still reading it. Real uv venvs (no package downloads: empty venvs).
"""

from __future__ import annotations

import importlib.util
import sys
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
        "[global]\nextra-index-url = file:///idx/one file:///idx/two\n"
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
