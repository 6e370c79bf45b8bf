"""Data that would train a useless drafter: file-wide checks over the replies of a run.

Why: placeholder or boilerplate replies, prompt-only rows and duplicates train silently on every
release. Workers fill a ``QualityStats`` the ledger carries to the parent, which decides per file
the ``warnings`` (fatal with ``--strict-data``); per row only an 8-byte hash is kept (issue 13).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from speculators_qwen_compat.core.run_options import current_options

HASH_BYTES = 8

#: One reply text this share of a file's replies (and at least this many) is a placeholder.
DOMINANT_SHARE, DOMINANT_MIN = 0.5, 4
#: Boilerplate replies this share of a file's replies (and at least this many) fire too.
BOILERPLATE_SHARE, BOILERPLATE_MIN = 0.3, 3
BOILERPLATE = frozenset(
    (
        "ok", "okay", "k", "sure", "done", "noted", "understood", "acknowledged", "thanks",
        "fine", "great", "cool", "yep", "yeah", "placeholder", "todo", "tbd", "n/a", "na",
        "none", "null", "response", "answer", "output", "reply", "got it", "thank you",
        "no problem", "certainly", "of course", "i see", "all right", "alright", "will do",
        "sounds good", "i understand", "lorem ipsum",
    )
)  # fmt: skip
_PUNCT = re.compile(r"[\s.!。,;:…\-*_`'\"]+")
REGENERATE = (
    "regenerate the replies with the target model (speculators 0.9: `speculators "
    "regenerate-responses`), or remove those rows"
)
WHAT_TO_DO = {
    "placeholder_replies": "a drafter trained on them learns to say them: " + REGENERATE,
    "boilerplate_replies": "a drafter trained on them learns to say them: " + REGENERATE,
    "prompt_only_rows": "they train nothing: generate the replies with the target model "
    "(speculators 0.9: `speculators regenerate-responses`)",
    "duplicate_conversations": "they train those conversations twice: deduplicate the data",
}


def file_of(source: str) -> str:
    """The file of a row's source (``file:line`` or ``file[index]``)."""
    if source.endswith("]") and "[" in source:
        return source[: source.rindex("[")]
    head, _, tail = source.rpartition(":")
    return head if head and tail.isdigit() else source


def boilerplate(text: str) -> bool:
    return len(text) <= 24 and _PUNCT.sub(" ", text.casefold()).strip() in BOILERPLATE


@dataclass
class FileStats:
    replies: int = 0
    boilerplate: int = 0
    prompt_only: int = 0
    prompt_only_example: str = ""
    texts: Counter[str] = field(default_factory=Counter)
    columns: Counter[str] = field(default_factory=Counter)
    hashes: bytearray = field(default_factory=bytearray)  # 8-byte digests, one per row


@dataclass
class QualityStats:
    """What the rows of a run (or one batch of it) say about their files."""

    files: dict[str, FileStats] = field(default_factory=dict)

    def add_row(
        self,
        source: str,
        column: str,
        conversation: list[dict[str, Any]],
        tools: Any = None,
        zero_weight_turns: list[int] | None = None,
        raw: str | None = None,
    ) -> None:
        """Count one kept row; ``raw``: its JSON text as read (hashed for the duplicate check,
        cheaper than serialising the conversation again)."""
        if raw is None:
            raw = json.dumps([conversation, tools], sort_keys=True, ensure_ascii=False)
        stats = self.add_key(source, column, raw)
        answered = False
        for index, turn in enumerate(conversation):
            if turn.get("role") != "assistant":
                continue
            text = _text(turn.get("content")).strip()
            if text or turn.get("tool_calls") or turn.get("reasoning_content"):
                answered = True
            if not text or turn.get("tool_calls") or index in (zero_weight_turns or ()):
                continue
            stats.replies += 1
            stats.texts[text[:200]] += 1
            stats.boilerplate += boilerplate(text)
        if not answered:
            stats.prompt_only += 1
            stats.prompt_only_example = stats.prompt_only_example or source

    def add_key(self, source: str, column: str, key: str) -> FileStats:
        """Count one row under ``column`` and hash ``key`` for the duplicate check (a row that
        is not a conversation, e.g. a speculator-format row, is counted by this alone)."""
        stats = self.files.setdefault(file_of(source), FileStats())
        stats.columns[column] += 1
        stats.hashes += hashlib.blake2b(key.strip().encode(), digest_size=HASH_BYTES).digest()
        return stats

    def to_json(self) -> dict[str, Any]:
        """Compact form for the ledger: singleton reply texts are dropped (they cannot make a
        placeholder), hashes joined into one string."""
        return {
            name: {
                "replies": s.replies,
                "boilerplate": s.boilerplate,
                "prompt_only": s.prompt_only,
                "prompt_only_example": s.prompt_only_example,
                "texts": {t: n for t, n in s.texts.items() if n > 1},
                "columns": dict(s.columns),
                "hashes": s.hashes.hex(),
            }
            for name, s in self.files.items()
        }

    def merge(self, data: dict[str, Any]) -> None:
        for name, item in data.items():
            stats = self.files.setdefault(name, FileStats())
            stats.replies += item["replies"]
            stats.boilerplate += item["boilerplate"]
            stats.prompt_only += item["prompt_only"]
            stats.prompt_only_example = stats.prompt_only_example or item["prompt_only_example"]
            stats.texts.update(item["texts"])
            stats.columns.update(item["columns"])
            stats.hashes += bytes.fromhex(item["hashes"])

    def __bool__(self) -> bool:
        return bool(self.files)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def warnings(stats: QualityStats) -> dict[str, dict[str, Any]]:
    """``kind -> {"count", "details", "what_to_do"}`` for every check that fires."""
    found: dict[str, dict[str, Any]] = {}

    def add(kind: str, count: int, detail: str) -> None:
        entry = found.setdefault(kind, {"count": 0, "details": [], "what_to_do": WHAT_TO_DO[kind]})
        entry["count"] += count
        entry["details"].append(detail)

    copies, repeats = duplicate_rows(stats.files)
    for name, s in sorted(stats.files.items()):
        if s.texts:
            text, top = s.texts.most_common(1)[0]
            if top >= DOMINANT_MIN and top >= DOMINANT_SHARE * s.replies:
                add(
                    "placeholder_replies",
                    top,
                    f"{name}: {top} of {s.replies} replies are {_quote(text)}",
                )
        if s.boilerplate >= BOILERPLATE_MIN and s.boilerplate >= BOILERPLATE_SHARE * s.replies:
            add(
                "boilerplate_replies",
                s.boilerplate,
                f"{name}: {s.boilerplate} of {s.replies} replies are short boilerplate",
            )
        if s.prompt_only:
            add(
                "prompt_only_rows",
                s.prompt_only,
                f"{name}: {s.prompt_only} rows without a reply (first: {s.prompt_only_example})",
            )
        if copies.get(name):
            add("duplicate_conversations", copies[name], f"{name}: {copies[name]} rows")
    if "duplicate_conversations" in found:  # count each repeat once, not each copy
        found["duplicate_conversations"]["count"] = repeats
    return {kind: found[kind] for kind in WHAT_TO_DO if kind in found}


def duplicate_rows(files: dict[str, FileStats]) -> tuple[dict[str, int], int]:
    """Per file, its rows whose conversation occurs more than once in the run (in any file);
    and the run's repeats (copies beyond the first). Sorting the packed digests with numpy (a
    dependency of transformers, so there wherever upstream runs) keeps this at a few bytes a
    row, without a Python object per row."""
    import numpy as np

    arrays = {k: np.frombuffer(s.hashes, dtype="<u8") for k, s in files.items()}
    joined = np.concatenate(list(arrays.values())) if arrays else np.zeros(0, dtype="<u8")
    values, counts = np.unique(joined, return_counts=True)
    repeated = values[counts > 1]
    copies = {k: int(np.isin(a, repeated).sum()) for k, a in arrays.items()}
    return copies, int((counts[counts > 1] - 1).sum())


def _quote(text: str) -> str:
    short = " ".join(text.split())
    return repr(short if len(short) <= 40 else short[:37] + "...")


LABELS = {
    "placeholder_replies": "placeholder replies",
    "boilerplate_replies": "boilerplate replies",
    "prompt_only_rows": "prompt-only rows",
    "duplicate_conversations": "exact duplicate conversations",
}


def summary(found: dict[str, dict[str, Any]]) -> str:
    """``warnings: 95 placeholder replies (a.jsonl: 95 of 100 replies are 'OK.'), ...``."""
    if not found:
        return ""
    parts = [
        f"{entry['count']} {LABELS[kind]} ({'; '.join(entry['details'][:2])})"
        for kind, entry in found.items()
    ]
    todo = dict.fromkeys(entry["what_to_do"] for entry in found.values())
    return "data warnings: " + ", ".join(parts) + " - " + "; ".join(todo)


def strict() -> bool:
    return current_options().strict_data
