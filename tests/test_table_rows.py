"""Parquet files, ``save_to_disk`` folders and ``hf:PATH`` give the rows the same data gives as
JSON lines, on every release (data/read/table_rows.py).

The data is the suite's own mix (conftest.good_rows: OpenAI and ShareGPT turns, tools, reasoning,
weights, system turns) plus its rejected rows, written by ``datasets`` itself: ``Dataset.from_list``
(Arrow's schema inference, struct unification and None fill-in, as a Hub upload gets them)
then ``to_parquet`` / ``save_to_disk``. Arrow holds one type per column, so rows are grouped
into files by shape (string or list content, ...); the JSONL oracle is the same groups, one
``.jsonl`` file each with the same name, run through the JSON path (checked elsewhere against
the processor and vLLM). Oracle: that run's rows and counts, exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import good_rows, prepare_args, read_report, rejected_rows, run_batch
from mask_oracle import load_rows


def _groups(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The rows in files Arrow can each hold as one table (the same columns, one type per
    column), in order, each row in the first file it fits; a row that fits none alone is left
    out (no Hub data set holds it either)."""
    from datasets import Dataset

    def fits(group: list[dict[str, Any]]) -> bool:
        try:
            Dataset.from_list(group)
        except Exception:
            return False
        return True

    groups: list[list[dict[str, Any]]] = []
    for row in rows:
        for group in groups:  # the same columns: Dataset.from_list takes the first row's
            if set(group[0]) == set(row) and fits([*group, row]):
                group.append(row)
                break
        else:
            if fits([row]):
                groups.append([row])
    return {f"part-{n:02d}": group for n, group in enumerate(groups)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, qwen36_dir: Path) -> dict[str, Any]:
    from datasets import Dataset

    work = tmp_path_factory.mktemp("tables")
    rows = good_rows(24, seed=3) + [row for _, row in rejected_rows()]
    groups = _groups(rows)
    assert len(groups) >= 2 and sum(map(len, groups.values())) >= 24
    jsonl, parquet = work / "jsonl", work / "parquet"
    jsonl.mkdir()
    parquet.mkdir()
    for name, group in groups.items():
        lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in group)
        (jsonl / f"{name}.jsonl").write_text(lines, encoding="utf-8")
        Dataset.from_list(group).to_parquet(str(parquet / f"{name}.parquet"))
    biggest = max(groups, key=lambda n: len(groups[n]))
    Dataset.from_list(groups[biggest]).save_to_disk(str(work / "saved"))
    data = {
        "jsonl": jsonl,
        "parquet": parquet,
        "hf_path": f"hf:{parquet}",
        "jsonl_one": jsonl / f"{biggest}.jsonl",
        "saved": work / "saved",
    }
    outputs = {name: work / "out" / name for name in data}
    cases = {name: prepare_args(qwen36_dir, outputs[name], spec) for name, spec in data.items()}
    return {"results": run_batch(work / "logs", cases), "outputs": outputs}


@pytest.mark.parametrize(
    ("name", "oracle"), [("parquet", "jsonl"), ("hf_path", "jsonl"), ("saved", "jsonl_one")]
)
def test_tables_give_the_jsonl_rows(runs: dict[str, Any], name: str, oracle: str) -> None:
    for run in (name, oracle):
        result = runs["results"][run]
        assert result.returncode == 0, (run, result.stderr[-3000:])
    expected = load_rows(runs["outputs"][oracle])
    assert expected and load_rows(runs["outputs"][name]) == expected
    got, want = read_report(runs["outputs"][name]), read_report(runs["outputs"][oracle])
    for key in ("conversations_in", "conversations_kept", "rows_out", "skipped", "errors"):
        assert got[key] == want[key], key
    assert want["skipped"], "the rejected rows are counted the same way"


SCHEMA_README = """---
dataset_info:
  features:
  - name: text
    dtype: string
  splits:
  - name: train
    num_examples: 2
---
"""


def test_load_failures_name_their_cause(tmp_path: Path) -> None:
    """``load_dataset``'s failures, as datasets raises them: a folder whose README schema does
    not match its files is named as such, not blamed on the offline mode; a Hub name that is
    not in the cache is."""
    from speculators_qwen_compat.core.errors import DataError
    from speculators_qwen_compat.data.read import table_rows

    folder = tmp_path / "mismatch"
    (folder / "data").mkdir(parents=True)
    (folder / "README.md").write_text(SCHEMA_README, encoding="utf-8")
    row = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    (folder / "data" / "train-00000-of-00001.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(DataError) as caught:
        table_rows.hub_dataset(f"hf:{folder}:train")
    words = str(caught.value)
    assert "do not match the schema its README declares" in words and "offline" not in words
    with pytest.raises(DataError) as caught:
        table_rows.hub_dataset("hf:someorg/never-downloaded")
    assert "offline (HF_HUB_OFFLINE=1) only data sets in the local" in str(caught.value)
