"""What one ``--data`` value names: the sources to read, and every file beside them not read.

Why: a dataset repo downloaded from the Hub holds all its splits; it is read as its train split,
as ``datasets.load_dataset`` picks it (datasets' own rules), and any file of a ``--data`` folder
not read is named in the last line and the report (docs/formats.md, "Data as the Hub holds it")."""

from __future__ import annotations

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

    def record(self) -> dict[str, Any]:
        """What compat_report.json's ``data`` says of this value."""
        out: dict[str, Any] = {"data": self.spec, "read": [self._name(s) for s in self.sources]}
        if self.split is not None:
            out["split"] = self.split
        if self.config not in (None, "default"):  # a repo's only config is "default"
            out["config"] = self.config
        if self.not_read:
            out["not_read"] = dict(self.not_read)
        return out

    def _name(self, source: Any) -> str:
        path = Path(str(source))
        if self.folder is not None and path.is_relative_to(self.folder):
            return path.relative_to(self.folder).as_posix()
        return str(source)


def words(record: dict[str, Any]) -> str:
    """The last line's words for one ``record``: "" for a file or folder read whole."""
    parts = []
    if "split" in record:
        read = record["read"]
        config = f" (config {record['config']})" if "config" in record else ""
        parts.append(f"read split {record['split']!r}{config} of {record['data']}: {_listed(read)}")
    if record.get("not_read"):
        names = [f"{name} ({why})" for name, why in record["not_read"].items()]
        parts.append(f"not read in {record['data']}: {_listed(names)}")
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
    files = _listed_files(folder)
    splits, chosen_config = _splits(folder, spec, config, named=split is not None)
    if splits is None:
        read = [f for f in files if compression.is_readable(f)]
        chosen = None
    else:
        chosen = split or TRAIN
        if chosen not in splits:
            raise DataError(
                f"--data {spec}: no split {chosen!r} (splits: {', '.join(sorted(splits))}); "
                f"name one with hf:{folder}:SPLIT"
            )
        read = [f for f in splits[chosen] if compression.is_readable(f)]
    found = DataSources(spec, [], folder.resolve(), chosen, chosen_config)
    absolute = found.folder
    assert absolute is not None
    in_split = {f: name for name, members in (splits or {}).items() for f in members}
    for file in files:
        if file in read:
            continue
        relative = file.relative_to(absolute).as_posix()
        other = in_split.get(file)
        if other is not None and other != chosen:
            found.not_read[relative] = f"split {other!r}: hf:{folder}:{other} reads it"
        elif not compression.is_readable(file):
            found.not_read[relative] = compression.why_not_read(file)
        else:
            found.not_read[relative] = f"in none of the splits ({', '.join(sorted(splits or {}))})"
    if not read:
        # upstream's own words (0.7+): its callers and tests match "No .json/.jsonl files found"
        where = f"split {chosen!r} of the folder" if chosen else "the folder"
        raise DataError(
            f"--data {spec}: No .json/.jsonl files found in {where} (nor .parquet files, nor "
            f"a save_to_disk dataset){_unread_words(found)}"
        )
    for file in read:
        compression.require(file, spec)
    # upstream's order (0.7+ sort the str paths, docs/upstream.md "Conversation column"), so
    # --max-samples keeps the same rows: "a-b.jsonl" comes before "a/c.jsonl"
    found.sources = [_source(f) for f in sorted(read, key=str)]
    return found


def _unread_words(found: DataSources) -> str:
    return f"; {words(found.record())}" if found.not_read else ""


def _listed_files(folder: Path) -> list[Path]:
    """Every file under ``folder`` that could hold rows, absolute: not hidden (a download's
    ``.cache/``, ``.gitattributes``), not a README or licence, not save_to_disk metadata, not
    an image or video the rows point at."""
    base = folder.resolve()
    out = []
    for path in base.rglob("*"):
        relative = path.relative_to(base)
        if any(part.startswith(".") for part in relative.parts) or not path.is_file():
            continue
        if path.name in NOT_DATA or path.name in table_rows.METADATA_NAMES:
            continue
        if path.suffix.lower() in MEDIA_SUFFIXES:
            continue
        out.append(path)
    return sorted(out, key=str)


def _card_configs(folder: Path) -> Any:
    """The README's ``configs:`` (datasets' MetadataConfigs), empty without any."""
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard

    readme = folder / README
    if not readme.is_file():
        return MetadataConfigs()
    try:
        return MetadataConfigs.from_dataset_card_data(DatasetCard.load(str(readme)).data)
    except Exception as exc:  # a YAML header datasets cannot read
        raise DataError(
            f"{readme}: its YAML header does not read as a dataset card ({exc})"
        ) from None


def _splits(
    folder: Path, spec: str, config: str | None, named: bool
) -> tuple[dict[str, list[Path]] | None, str | None]:
    """The folder's splits as datasets infers them (split -> files, absolute) and the config
    read, or (None, None) for a folder that is no Hub repo and was given without a split."""
    from datasets.data_files import (
        DEFAULT_PATTERNS_ALL,
        DataFilesDict,
        get_data_patterns,
        sanitize_patterns,
    )

    base = folder.resolve()
    configs = _card_configs(folder)
    chosen = None
    if configs and any("data_files" in c for c in configs.values()):
        chosen = _config(configs, spec, config)
        settings = configs[chosen]
        base = base / settings.get("data_dir", "")
        patterns = sanitize_patterns(settings.get("data_files", "**"))
    else:
        if config is not None:
            raise DataError(
                f"--data {spec}: the folder's README declares no configs; use hf:{folder}:SPLIT"
            )
        try:
            patterns = get_data_patterns(str(base))
        except Exception:  # EmptyDatasetError: no file datasets would read as data
            patterns = dict(DEFAULT_PATTERNS_ALL)
        by_name = any(p.startswith("data/") for ps in patterns.values() for p in ps)
        card = (folder / README).is_file() and patterns != DEFAULT_PATTERNS_ALL
        if not (named or by_name or card):
            return None, None
    try:
        resolved = DataFilesDict.from_patterns(patterns, base_path=str(base))
    except Exception as exc:  # FileNotFoundError: a pattern that matches no file
        raise DataError(
            f"--data {spec}: the folder's splits do not resolve ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:300]})"
        ) from None
    return {str(name): [Path(f) for f in files] for name, files in resolved.items()}, chosen


def _config(configs: Any, spec: str, config: str | None) -> str:
    """The config to read: ``config``, the one marked default, or the only one."""
    names = list(configs)
    if config is not None:
        if config not in configs:
            raise DataError(f"--data {spec}: no config {config!r} (configs: {', '.join(names)})")
        return config
    default = configs.get_default_config_name()
    if default is not None:
        return default
    if len(names) == 1:
        return names[0]
    raise DataError(
        f"--data {spec}: the README declares configs {', '.join(names)} and none is the "
        "default; name one with hf:FOLDER:CONFIG:SPLIT"
    )
