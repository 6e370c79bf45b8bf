"""What one ``--data`` value names: the sources to read, and every file beside them not read.

Why: a dataset repo downloaded from the Hub holds all its splits; it is read as its train split,
as ``datasets.load_dataset`` picks it (datasets' own rules), and any file of a ``--data`` folder
not read is named in the last line and the report (docs/formats.md, "Data as the Hub holds it")."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speculators_qwen_compat.core.errors import DataError, DataFileNotFoundError
from speculators_qwen_compat.data.read import compression, table_rows

TRAIN = "train"
README = "README.md"
#: files of a repo or of save_to_disk that are never rows, and not worth a word
NOT_DATA = frozenset({README, "README", "LICENSE", "LICENSE.md", "LICENSE.txt"})
#: files rows point at (LLaVA's image folders beside the JSON): media, not rows
MEDIA_SUFFIXES = frozenset({
    ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff",
    ".mp4", ".mov", ".avi", ".mkv", ".webm", ".wav", ".mp3",
})  # fmt: skip
#: a download's and git's own folders and files, never rows
TOOL_FOLDERS = frozenset({".cache", ".git", ".huggingface"})
TOOL_FILES = frozenset({".gitattributes", ".gitignore"})
#: the Hub's shard names: PREFIX-NNNNN-of-MMMMM.ext
SHARD = re.compile(r"(?P<prefix>.+)-\d{5}-of-(?P<of>\d{5})\.")
#: names shown in the last line before "and N more" (compat_report.json lists them all)
SHOWN = 3


@dataclass
class DataSources:
    """A ``--data`` value resolved: the sources read in order (paths, or table_rows.py
    sources), the split read (a Hub folder's), and the files not read, with why."""

    spec: str
    sources: list[Any]
    folder: Path | None = None
    split: str | None = None
    config: str | None = None
    not_read: dict[str, str] = field(default_factory=dict)  # file (in the folder) -> why
    missing: list[str] = field(default_factory=list)  # shards named by the files, not there
    split_names: str = ""  # a folder read whole whose file names name splits: which

    def record(self) -> dict[str, Any]:
        """What compat_report.json's ``data`` says of this value."""
        out: dict[str, Any] = {"data": self.spec, "read": [self._name(s) for s in self.sources]}
        if self.split is not None:
            out["split"] = self.split
        if self.config not in (None, "default"):  # a repo's only config is "default"
            out["config"] = self.config
        if self.not_read:
            out["not_read"] = dict(self.not_read)
        if self.missing:
            out["missing_shards"] = list(self.missing)
        if self.split_names:
            out["split_names"] = self.split_names
        return out

    def _name(self, source: Any) -> str:
        path = Path(str(source))
        if self.folder is not None and path.is_relative_to(self.folder):
            return path.relative_to(self.folder).as_posix()
        return str(source)


def words(record: dict[str, Any]) -> str:
    """The last line's words for one ``record``: "" for a file or folder read whole."""
    parts = []
    if "split" in record and record["read"]:
        read = record["read"]
        config = f" (config {record['config']})" if "config" in record else ""
        parts.append(f"read split {record['split']!r}{config} of {record['data']}: {_listed(read)}")
    if record.get("not_read"):
        names = [f"{name} ({why})" for name, why in record["not_read"].items()]
        parts.append(f"not read in {record['data']}: {_listed(names)}")
    if record.get("split_names"):
        parts.append(f"{record['data']} read whole, its files named as splits: "
                     f"{record['split_names']}")  # fmt: skip
    if record.get("missing_shards"):
        shards = ", ".join(record["missing_shards"])
        parts.append(f"shards missing in {record['data']} (a download cut short?): {shards}")
    return "; ".join(parts)


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN])
    more = len(names) - SHOWN
    return f"{shown} and {more} more (compat_report.json lists them)" if more > 0 else shown


def resolve(spec: str) -> DataSources | None:
    """The sources a ``--data`` value names, or None when it is none we read (a preset name
    or an ``hf://`` URI, left to upstream)."""
    path = Path(spec)
    if table_rows.is_hub_spec(spec):
        name, subset, split = table_rows.parse_hub_spec(spec)
        local = Path(name)
        if local.is_dir():
            if table_rows.is_saved_folder(local):
                if subset is not None:
                    raise DataError(f"--data {spec}: a save_to_disk folder has no configs")
                return DataSources(spec, [table_rows.saved_dataset(local, spec, split)])
            return _folder(local, spec, subset, split)
        if subset is None and split is None and local.exists():
            return resolve(name)  # hf:FILE: the local file
        return DataSources(spec, [table_rows.hub_dataset(spec)])
    if path.is_dir():
        if table_rows.is_saved_folder(path):
            return DataSources(spec, [table_rows.saved_dataset(path, spec)])
        return _folder(path, spec, None, None)
    suffix, packed = compression.data_suffix(spec)
    if packed is not None or suffix in (*compression.JSON_SUFFIXES, table_rows.PARQUET_SUFFIX):
        if not path.is_file():
            raise DataFileNotFoundError(f"--data {spec}: no such file")
        if not compression.is_readable(path):
            raise DataError(f"--data {spec}: {compression.why_not_read(path)}")
        compression.require(path, spec)
        return DataSources(spec, [_source(path)])
    return None


def _source(path: Path) -> Any:
    if compression.data_suffix(path) == (table_rows.PARQUET_SUFFIX, None):
        return table_rows.ParquetFile(path)
    return path


def _folder(folder: Path, spec: str, config: str | None, split: str | None) -> DataSources:
    """A folder's sources: its train split (or ``split``) when it is a Hub repo folder or a
    split is named, else every data file in it."""
    folder = _snapshot(folder)
    files = _listed_files(folder)
    layout = _layout(folder, spec, config, files, named=split is not None)
    found = DataSources(spec, [], folder.resolve())
    if layout is None or not layout.repo:
        read = [f for f in files if compression.is_readable(f)]
        if layout is not None:  # split names in a folder read whole: said, as a user may mean them
            found.split_names = layout.named(found.folder, folder)
    else:
        found.split, found.config = split or TRAIN, layout.config
        splits = layout.splits[layout.config]
        if found.split not in splits:
            raise DataError(
                f"--data {spec}: no split {found.split!r} (splits: {', '.join(sorted(splits))}"
                f"); name one with {layout.spec(folder, 'SPLIT')}"
            )
        read = [f for f in splits[found.split] if compression.is_readable(f)]
    for file in files:
        if file not in read:
            why = layout.why_not(file, found.split, folder) if layout and layout.repo else None
            found.not_read[file.relative_to(found.folder).as_posix()] = why or (
                compression.why_not_read(file)
            )
    if not read:
        # upstream's own words (0.7+): its callers and tests match "No .json/.jsonl files found"
        where = f"split {found.split!r} of the folder" if found.split else "the folder"
        unread = f"; {words(found.record())}" if found.not_read else ""
        raise DataError(
            f"--data {spec}: No .json/.jsonl files found in {where} (nor .parquet files, nor "
            f"a save_to_disk dataset){unread}"
        )
    for file in read:
        compression.require(file, spec)
    found.missing = _missing_shards(read, found.folder)
    # upstream's order (0.7+ sort the str paths, docs/upstream.md "Conversation column"), so
    # --max-samples keeps the same rows: "a-b.jsonl" comes before "a/c.jsonl"
    found.sources = [_source(f) for f in sorted(read, key=str)]
    return found


def _snapshot(folder: Path) -> Path:
    """The Hugging Face cache's folder of a repo (``datasets--ORG--NAME``: blobs/, refs/,
    snapshots/) stands for the snapshot its ``refs/main`` names, as the cache reads it."""
    ref = folder / "refs" / "main"
    if ref.is_file() and (folder / "snapshots").is_dir():
        snapshot = folder / "snapshots" / ref.read_text(encoding="utf-8").strip()
        if snapshot.is_dir():
            return snapshot
    return folder


def _listed_files(folder: Path) -> list[Path]:
    """Every file under ``folder`` that could hold rows, absolute (symlinked folders followed,
    as the Hub cache's snapshots need): not a download's or git's own files, not a README or
    licence, not save_to_disk metadata, not an image or video the rows point at."""
    base = folder.resolve()
    out = []
    seen: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(base, followlinks=True):
        real = os.path.realpath(dirpath)
        if real in seen:  # a symlink loop
            dirnames.clear()
            continue
        seen.add(real)
        dirnames[:] = [d for d in dirnames if d not in TOOL_FOLDERS]
        for name in filenames:
            if name in NOT_DATA or name in table_rows.METADATA_NAMES or name in TOOL_FILES:
                continue
            if os.path.splitext(name)[1].lower() in MEDIA_SUFFIXES:
                continue
            if os.path.isfile(os.path.join(dirpath, name)):
                out.append(Path(dirpath, name))
    return sorted(out, key=str)


def _missing_shards(read: list[Path], folder: Path) -> list[str]:
    """``PREFIX-NNNNN-of-MMMMM`` shards the files read name but the folder lacks (a download
    cut short): the patterns, with how many of them are here."""
    groups: dict[tuple[str, int], int] = {}
    for file in read:
        match = SHARD.match(file.name)
        if match:
            prefix = f"{file.parent.relative_to(folder).as_posix()}/{match['prefix']}"
            groups[prefix, int(match["of"])] = groups.get((prefix, int(match["of"])), 0) + 1
    return [
        f"{prefix.removeprefix('./')}-*-of-{total:05d} ({count} of {total})"
        for (prefix, total), count in sorted(groups.items())
        if count < total
    ]


@dataclass
class _Layout:
    """A repo folder's splits per config, as datasets infers them (files absolute)."""

    splits: dict[str | None, dict[str, list[Path]]]
    config: str | None  # the config read (None: the README declares none)
    repo: bool = True  # laid out as a repo; else read whole, its split names only mentioned

    def spec(self, folder: Path, split: str, config: str | None = None) -> str:
        config = config or self.config
        several = len(self.splits) > 1
        return f"hf:{folder}:{config}:{split}" if several and config else f"hf:{folder}:{split}"

    def named(self, base: Path | None, folder: Path) -> str:
        """For a folder read whole: which of its files datasets would put in which split."""
        parts = []
        for name, members in sorted(self.splits[self.config].items()):
            if name != TRAIN and members and base is not None:
                shown = _listed([f.relative_to(base).as_posix() for f in members])
                parts.append(f"{name}: {shown}")
        if not parts:
            return ""
        return f"{'; '.join(parts)} (all read; hf:{folder}:train reads the train split only)"

    def why_not(self, file: Path, split: str | None, folder: Path) -> str | None:
        for config, splits in self.splits.items():
            for name, members in splits.items():
                if file in members and (config, name) != (self.config, split):
                    where = f"config {config!r}, split {name!r}"
                    if config == self.config or len(self.splits) == 1:
                        where = f"split {name!r}"
                    return f"{where}: {self.spec(folder, name, config)} reads it"
        if compression.is_readable(file):
            return f"in none of the splits ({', '.join(sorted(self.splits[self.config]))})"
        return None


def _layout(
    folder: Path, spec: str, config: str | None, files: list[Path], named: bool
) -> _Layout | None:
    """The folder's splits (None: datasets sees none). It is a repo layout (``repo``), read by
    splits, with a README ``configs:`` block, a download's marks (``.cache/huggingface``,
    ``.gitattributes``, a YAML dataset card), ``data/<split>`` names, or files that all fall in
    named splits; else it is read whole and its split names are only mentioned."""
    from datasets.data_files import DEFAULT_PATTERNS_ALL, get_data_patterns, sanitize_patterns

    base = folder.resolve()
    card = _card_configs(folder)
    configs = {
        name: settings
        for name, settings in (card or {}).items()
        if "data_files" in settings or "data_dir" in settings
    }
    if configs:
        chosen = _config(configs, spec, config)
        layout = _Layout({}, chosen)
        for name, settings in configs.items():
            root = base / settings.get("data_dir", "")
            patterns = (
                sanitize_patterns(settings["data_files"])
                if "data_files" in settings
                else _patterns(root, get_data_patterns, DEFAULT_PATTERNS_ALL)
            )
            layout.splits[name] = _resolved(patterns, root, spec, required=name == chosen)
        return layout
    if config is not None:
        raise DataError(
            f"--data {spec}: the folder's README declares no configs with data files; use "
            f"hf:{folder}:SPLIT"
        )
    patterns = _patterns(base, get_data_patterns, DEFAULT_PATTERNS_ALL)
    layout = _Layout({None: _resolved(patterns, base, spec, required=True)}, None)
    if named:
        return layout
    if patterns == DEFAULT_PATTERNS_ALL:
        return None
    in_splits = {f for members in layout.splits[None].values() for f in members}
    hub_names = any(f.relative_to(base).parts[0] == "data" for f in in_splits)
    downloaded = (base / ".cache" / "huggingface").is_dir() or (base / ".gitattributes").is_file()
    yaml_card = card is not None and (base / README).read_bytes().startswith(b"---")
    alone = all(f in in_splits for f in files if compression.is_readable(f))
    layout.repo = bool(hub_names or downloaded or yaml_card or alone)
    return layout


def _patterns(base: Path, infer: Any, default: dict) -> dict:
    try:
        return infer(str(base))
    except Exception:  # EmptyDatasetError: no file datasets would read as data
        return dict(default)


def _resolved(patterns: Any, base: Path, spec: str, required: bool) -> dict[str, list[Path]]:
    """``patterns`` (split -> globs) as files under ``base``, by datasets' own resolution."""
    from datasets.data_files import DataFilesDict

    try:
        resolved = DataFilesDict.from_patterns(patterns, base_path=str(base))
    except Exception as exc:  # FileNotFoundError: a pattern that matches no file
        if not required:
            return {}
        raise DataError(
            f"--data {spec}: the folder's splits do not resolve ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:300]})"
        ) from None
    return {str(name): [Path(f) for f in files] for name, files in resolved.items()}


def _card_configs(folder: Path) -> dict[str, Any] | None:
    """The README's ``configs:`` (datasets' MetadataConfigs, empty without any), or None without
    a README or with a header that is no dataset card (a Jekyll page's, say)."""
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard

    readme = folder / README
    if not readme.is_file():
        return None
    try:
        return MetadataConfigs.from_dataset_card_data(DatasetCard.load(str(readme)).data)
    except Exception:
        return None


def _config(configs: dict[str, Any], spec: str, config: str | None) -> str:
    """The config to read: ``config``, the one marked default, or the only one."""
    names = list(configs)
    if config is not None:
        if config not in configs:
            raise DataError(f"--data {spec}: no config {config!r} (configs: {', '.join(names)})")
        return config
    default = [name for name, settings in configs.items() if settings.get("default")]
    if default:
        return default[0]
    if len(names) == 1:
        return names[0]
    raise DataError(
        f"--data {spec}: the README declares configs {', '.join(names)} and none is the "
        "default; name one with hf:FOLDER:CONFIG:SPLIT"
    )
