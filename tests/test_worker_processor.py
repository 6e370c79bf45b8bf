"""Spawned map workers load the target's processor trusting its code exactly when the parent
did: the render endpoint the parent hands its map workers says so (data/render/endpoint.py,
``local-trusted:PATH``), so a model whose tokenizer is the repository's own code loads as that
code in a fresh process once the parent loaded it with ``trust_remote_code=True``; before, a
spawned worker quietly got transformers' built-in class instead of the parent's.

The oracle is transformers itself (which class it loads with and without trust); the child is
a fresh interpreter (tests/programs/processor_loader.py) with the parent's environment, as a spawned
worker is.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import program, subprocess_env

from speculators_qwen_compat import demo
from speculators_qwen_compat.data.render import endpoint

pytestmark = pytest.mark.pure  # transformers and our renderer alone: run once (tools/matrix.py)

HERE = Path(__file__).resolve().parent


def _remote_code_model(folder: Path) -> Path:
    model = demo.write_model(folder)
    shutil.copy(HERE / "remote_code" / "remote_tokenizer.py", model)
    config_path = model / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["auto_map"] = {"AutoTokenizer": [None, "remote_tokenizer.RemoteTokenizerFast"]}
    config_path.write_text(json.dumps(config))
    return model


def _load_in_child(local: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(program("processor_loader")), local],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip


def test_spawned_worker_trusts_the_model_code_as_the_parent_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import AutoProcessor

    model = _remote_code_model(tmp_path / "model")
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    env = subprocess_env(HF_MODULES_CACHE=str(tmp_path / "modules"))
    untrusted = _load_in_child(f"{endpoint.LOCAL}:{model}", env)
    # without the parent's trust, transformers quietly gives its own class: not the parent's
    assert untrusted.returncode == 0, untrusted.stderr[-3000:]
    assert untrusted.stdout.strip() != "RemoteTokenizerFast"

    processor = AutoProcessor.from_pretrained(str(model), trust_remote_code=True)
    assert type(processor).__name__ == "RemoteTokenizerFast"
    local = endpoint.local_endpoint(processor)
    assert local == f"{endpoint.TRUSTED}:{model}"
    trusted = _load_in_child(local, env)
    assert trusted.returncode == 0, trusted.stderr[-3000:]
    assert trusted.stdout.strip() == "RemoteTokenizerFast"

    plain = demo.write_model(tmp_path / "plain")
    # a plain model is not trusted
    assert endpoint.local_endpoint(AutoProcessor.from_pretrained(str(plain))) == f"local:{plain}"
