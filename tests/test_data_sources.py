"""Which files a ``--data`` folder is read from: a repo folder's train split by datasets' own
rules, a plain folder whole, and every file not read named (data/read/sources.py), on each
release's ``datasets``. Doctor reads the same files and says so.

The folders are written here as a Hub download or a user leaves them; the expected split of
each file is the one datasets' documentation gives for its name (``data/<split>-*``, a
README's ``configs:``), written by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import PACKAGE_MAIN, good_rows, run_batch

from speculators_qwen_compat import demo
from speculators_qwen_compat.core.errors import DataError
from speculators_qwen_compat.data.read.sources import resolve

ROW = json.dumps(good_rows(1)[0]) + "\n"


def _files(folder: Path, *names: str) -> Path:
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(ROW, encoding="utf-8")
    return folder


def _read(spec: str) -> tuple[list[str], dict[str, str], str | None]:
    found = resolve(spec)
    assert found is not None and found.folder is not None
    names = [Path(str(s)).relative_to(found.folder).as_posix() for s in found.sources]
    return names, found.not_read, found.split


def test_a_plain_folder_is_read_whole_whatever_its_names(tmp_path: Path) -> None:
    """No README and no data/<split>-* names: a folder users had before is read as before, even
    files whose names hold a split word."""
    folder = _files(tmp_path / "chats", "a.jsonl", "chat_test.jsonl", "dev_notes.jsonl",
                    "more/train.json")  # fmt: skip
    names, not_read, split = _read(str(folder))
    assert names == ["a.jsonl", "chat_test.jsonl", "dev_notes.jsonl", "more/train.json"]
    assert not_read == {} and split is None
    # the names datasets would read as splits are said, in case the user meant them so
    found = resolve(str(folder))
    assert found is not None and found.record()["split_names"] == (
        f"test: chat_test.jsonl; validation: dev_notes.jsonl (all read; hf:{folder}:train reads "
        "the train split only)"
    )


@pytest.mark.parametrize(
    "readme", ["# my chats\n", "---\nlayout: post\ntitle: [unclosed\n---\nA Jekyll page.\n"]
)
def test_a_readme_that_is_no_dataset_card_keeps_a_plain_folder_whole(
    tmp_path: Path, readme: str
) -> None:
    """A one-line README, or a Jekyll page's header that is no YAML card: a folder users had."""
    folder = _files(tmp_path / "chats", "a.jsonl", "my_train.jsonl", ".old/hidden.jsonl")
    (folder / "README.md").write_text(readme, encoding="utf-8")
    names, not_read, split = _read(str(folder))
    assert names == [".old/hidden.jsonl", "a.jsonl", "my_train.jsonl"] and split is None
    assert not_read == {}


def test_a_download_without_a_readme_reads_its_train_split(tmp_path: Path) -> None:
    """``huggingface-cli download --local-dir`` of a repo with data/train.jsonl and
    data/test.jsonl (its .cache/huggingface/ metadata beside them), and root train/test files
    that are the folder's only data: both by datasets' names."""
    download = _files(tmp_path / "dl", "data/train.jsonl", "data/test.jsonl",
                      ".cache/huggingface/download/data/train.jsonl.metadata")  # fmt: skip
    assert _read(str(download))[:1] == (["data/train.jsonl"],)
    assert list(_read(str(download))[1]) == ["data/test.jsonl"]
    beside = _files(tmp_path / "beside", "data/train.jsonl", "data/test.jsonl", "extra.jsonl")
    assert _read(str(beside))[:2] == (
        ["data/train.jsonl"], {"data/test.jsonl": f"split 'test': hf:{beside}:test reads it",
                               "extra.jsonl": "in none of the splits (test, train)"},
    )  # fmt: skip
    roots = _files(tmp_path / "roots", "train.jsonl", "test.jsonl")
    (roots / "notes.txt").write_text("how these were made\n", encoding="utf-8")
    assert _read(str(roots))[0] == ["train.jsonl"]


def test_the_hub_caches_repo_folder_reads_its_snapshot(tmp_path: Path) -> None:
    """``~/.cache/huggingface/hub/datasets--org--name``: refs/main names the snapshot read;
    the symlinked folders of a snapshot are followed (the cache links files to blobs)."""
    repo = tmp_path / "datasets--org--chats"
    blobs = _files(repo / "blobs", "aaa", "bbb")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("rev2\n")
    for rev in ("rev1", "rev2"):
        (repo / "snapshots" / rev / "data").mkdir(parents=True)
        (repo / "snapshots" / rev / "data" / "train-00000-of-00001.jsonl").symlink_to(blobs / "aaa")
        (repo / "snapshots" / rev / "data" / "test-00000-of-00001.jsonl").symlink_to(blobs / "bbb")
    names, not_read, split = _read(str(repo))
    assert (names, split) == (["data/train-00000-of-00001.jsonl"], "train")
    assert list(not_read) == ["data/test-00000-of-00001.jsonl"]


def test_a_symlinked_folder_is_read(tmp_path: Path) -> None:
    real = _files(tmp_path / "elsewhere", "b.jsonl")
    folder = _files(tmp_path / "chats", "a.jsonl")
    (folder / "more").symlink_to(real, target_is_directory=True)
    assert _read(str(folder))[0] == ["a.jsonl", "more/b.jsonl"]


def test_a_shard_missing_from_a_download_is_named(tmp_path: Path) -> None:
    folder = _files(tmp_path / "cut", "data/train-00000-of-00002.jsonl")
    found = resolve(str(folder))
    assert found is not None
    assert found.record()["missing_shards"] == ["data/train-*-of-00002 (1 of 2)"]


def test_a_readme_beside_split_names_reads_the_train_split(tmp_path: Path) -> None:
    folder = _files(tmp_path / "repo", "train.jsonl", "test.jsonl", "validation.jsonl")
    (folder / "README.md").write_text("# a dataset card\n", encoding="utf-8")
    names, not_read, split = _read(str(folder))
    assert (names, split) == (["train.jsonl"], "train")
    assert list(not_read) == ["test.jsonl", "validation.jsonl"]
    assert not_read["test.jsonl"] == f"split 'test': hf:{folder}:test reads it"
    assert _read(f"hf:{folder}:validation")[0] == ["validation.jsonl"]


def test_a_folder_without_a_train_split_names_its_splits(tmp_path: Path) -> None:
    folder = _files(tmp_path / "evals", "data/test-00000-of-00001.jsonl",
                    "data/validation-00000-of-00001.jsonl")  # fmt: skip
    with pytest.raises(DataError) as caught:
        resolve(str(folder))
    assert f"--data {folder}: no split 'train' (splits: test, validation)" in str(caught.value)


def test_readme_configs_choose_the_files(tmp_path: Path) -> None:
    """Two configs, one marked default; ``hf:DIR:CONFIG:SPLIT`` reads the other."""
    folder = _files(tmp_path / "repo", "en/part-0.jsonl", "en/held.jsonl", "fr/part-0.jsonl")
    (folder / "README.md").write_text(
        "---\nconfigs:\n- config_name: en\n  default: true\n  data_files:\n  - split: train\n"
        "    path: en/part-*\n  - split: test\n    path: en/held.jsonl\n- config_name: fr\n"
        "  data_files:\n  - split: train\n    path: fr/part-*\n---\n",
        encoding="utf-8",
    )
    names, not_read, split = _read(str(folder))
    assert (names, split) == (["en/part-0.jsonl"], "train")
    assert not_read["en/held.jsonl"] == f"split 'test': hf:{folder}:en:test reads it"
    # another config's file: named with its config, never read silently
    assert not_read["fr/part-0.jsonl"] == (
        f"config 'fr', split 'train': hf:{folder}:fr:train reads it"
    )
    assert _read(f"hf:{folder}:fr:train")[0] == ["fr/part-0.jsonl"]


def test_configs_by_data_dir(tmp_path: Path) -> None:
    """Configs that name only a ``data_dir``: each reads its own folder by datasets' names."""
    folder = _files(tmp_path / "repo", "en/train.jsonl", "en/test.jsonl", "fr/train.jsonl")
    (folder / "README.md").write_text(
        "---\nconfigs:\n- config_name: en\n  data_dir: en\n  default: true\n"
        "- config_name: fr\n  data_dir: fr\n---\n",
        encoding="utf-8",
    )
    names, not_read, _ = _read(str(folder))
    assert names == ["en/train.jsonl"] and sorted(not_read) == ["en/test.jsonl", "fr/train.jsonl"]
    assert _read(f"hf:{folder}:fr:train")[0] == ["fr/train.jsonl"]


def test_doctor_reads_the_train_split_and_says_so(tmp_path: Path) -> None:
    folder = _files(tmp_path / "repo", "data/train-00000-of-00001.jsonl",
                    "data/test-00000-of-00001.jsonl")  # fmt: skip
    (folder / "data" / "test-00000-of-00001.jsonl").write_text(
        json.dumps({"messages": [{"role": "user", "content": "EVALUATION ROW"},
                                 {"role": "assistant", "content": "held out"}]}) + "\n"
    )  # fmt: skip
    args = ["doctor", "--model", str(demo.MODEL_DIR), "--data", str(folder)]
    result = run_batch(tmp_path / "logs", {"doctor": args}, {"doctor": PACKAGE_MAIN})["doctor"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert (
        f"data: read split 'train' of {folder}: data/train-00000-of-00001.jsonl; not read in "
        f"{folder}: data/test-00000-of-00001.jsonl" in result.stdout
    ), result.stdout[-3000:]
    assert "EVALUATION ROW" not in result.stdout
