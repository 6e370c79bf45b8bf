"""A folder given as --data is read in upstream's order, so --max-samples keeps the same rows.

Upstream (0.7+, docs/upstream.md "Conversation column") lists a folder's ``.json``/``.jsonl``
files and sorts their paths as strings: ``a-extra.jsonl`` comes before ``a/part.jsonl``
("-" sorts before "/"), which sorting ``Path`` objects (part by part) reverses. The oracle is
upstream's own ``load_raw_dataset`` with the fixes off (the ``folder_order`` probe of
programs/upstream_pins.py, in the session's pins interpreter); 0.5 and 0.6 read no folders, and
get the same order.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import RELEASE
from packaging.version import Version
from programs.upstream_pins import FAILED, ORDER_FILES, write_order_folder

from speculators_qwen_compat.data.read.files import read_rows
from speculators_qwen_compat.data.read.sources import resolve


def _our_order(folder: Path) -> list[str]:
    rows = read_rows(resolve(str(folder)).sources, None, keep=100)
    return [json.loads(line)["id"] for line in rows.lines]


def test_a_folder_is_read_in_upstreams_order(tmp_path: Path, pins: dict[str, str]) -> None:
    folder = write_order_folder(tmp_path / "data")
    ours = _our_order(folder)
    by_string = sorted(ORDER_FILES, key=lambda name: str(folder / name))
    assert ours == [f"{name}#{i}" for name in by_string for i in range(2)]
    assert ours.index("a-extra.jsonl#0") < ours.index("a/part.jsonl#0")
    if Version("0.7") > RELEASE:  # 0.5/0.6 read no folders themselves: the rule above holds
        return
    assert not pins["folder_order"].startswith(FAILED), pins["folder_order"]
    upstream = json.loads(pins["folder_order"])  # upstream's reader, fixes off, on its folder
    assert _our_order(Path(upstream["folder"])) == upstream["ids"]
