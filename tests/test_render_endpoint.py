"""``--render-endpoint``: local rendering against a server speaking vLLM's /render contract."""

from __future__ import annotations

from pathlib import Path

from conftest import RENDERS, good_rows, prepare, read_report, rejected_rows, write_dataset
from mask_oracle import load_rows
from render_server import RenderServer


def _prepare(model: Path, data: Path, output: Path, *extra: str):
    return prepare(model, output, data, extra=extra)


def test_local_and_http_rendering_give_identical_rows(qwen36_dir: Path, tmp_path: Path) -> None:
    rows = good_rows(18) + [row for _, row in rejected_rows()]
    data = write_dataset(tmp_path / "d.jsonl", rows)
    if not RENDERS:  # <= 0.7 tokenize locally and have no such flag
        result = _prepare(qwen36_dir, data, tmp_path / "x", "--render-endpoint", "local")
        assert result.returncode == 2
        assert "unrecognized arguments: --render-endpoint" in result.stderr
        return
    from transformers import AutoTokenizer

    local = _prepare(qwen36_dir, data, tmp_path / "local")  # omitted flag: local
    assert local.returncode == 0, local.stderr[-3000:]
    assert "no --render-endpoint given: rendering locally" in local.stderr
    with RenderServer(AutoTokenizer.from_pretrained(str(qwen36_dir))) as server:
        http = _prepare(qwen36_dir, data, tmp_path / "http", "--render-endpoint", server.url)
        requests = server.requests
    assert http.returncode == 0, http.stderr[-3000:]
    assert requests > len(rows), "the URL was not used"
    assert load_rows(tmp_path / "local") == load_rows(tmp_path / "http")
    assert read_report(tmp_path / "local")["rows_out"] == read_report(tmp_path / "http")["rows_out"]
    local_skips = read_report(tmp_path / "local")["skipped"]
    assert sum(local_skips.values()) == sum(read_report(tmp_path / "http")["skipped"].values())
