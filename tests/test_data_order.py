"""A folder given as --data is read in upstream's order, so --max-samples keeps the same rows.

Upstream (0.7+, docs/upstream.md "Conversation column") lists a folder's ``.json``/``.jsonl``
files and sorts their paths as strings: ``a-extra.jsonl`` comes before ``a/part.jsonl``
("-" sorts before "/"), which sorting ``Path`` objects (part by part) reverses. The oracle is
upstream's own ``load_raw_dataset`` with the fixes off (tests/upstream_file_order.py); 0.5 and
0.6 read no folders, and get the same order.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import RELEASE, subprocess_env
from packaging.version import Version

from speculators_qwen_compat.data.files import local_json_files, read_rows

HERE = Path(__file__).resolve().parent
FILES = ("a/part.jsonl", "a-extra.jsonl", "a0.jsonl", "A.jsonl", "a/b/deep.jsonl", "a.b.jsonl")


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    for name in FILES:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = [
            {"id": f"{name}#{i}", "conversations": [
                {"from": "human", "value": "hi"}, {"from": "gpt", "value": f"{name} {i}"}]}
            for i in range(2)
        ]  # fmt: skip
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _our_order(folder: Path) -> list[str]:
    rows = read_rows(local_json_files(str(folder)) or [], None, keep=100)
    return [json.loads(line)["id"] for line in rows.lines]


def test_a_folder_is_read_in_upstreams_order(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    ours = _our_order(folder)
    by_string = sorted(FILES, key=lambda name: str(folder / name))
    assert ours == [f"{name}#{i}" for name in by_string for i in range(2)]
    assert ours.index("a-extra.jsonl#0") < ours.index("a/part.jsonl#0")
    if Version("0.7") > RELEASE:  # 0.5/0.6 read no folders themselves: the rule above holds
        return
    upstream = subprocess.run(
        [sys.executable, str(HERE / "upstream_file_order.py"), str(folder)],
        capture_output=True, text=True, timeout=600,
        env=subprocess_env(SPECULATORS_QWEN_COMPAT="0", HF_DATASETS_CACHE=str(tmp_path / "hf")),
    )  # fmt: skip
    assert upstream.returncode == 0, upstream.stderr[-3000:]
    assert ours == json.loads(upstream.stdout.strip().splitlines()[-1])
