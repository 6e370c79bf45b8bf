"""Tokenizing rendered chats piece by piece, each piece between special tokens once per process.

Target: ``render.render_ids``. Why: 0.8+ render every conversation prefix, so the same turns were
tokenized again and again (docs/maintainers.md, "Speed"). Pieces are looked up and the previous
render's ids reused; a tokenizer this cannot reproduce exactly (checked) is encoded whole.
"""

from __future__ import annotations

import bisect
import logging
import re
import sys
from array import array
from typing import Any

log = logging.getLogger("speculators_qwen_compat")

#: Bytes of text and ids the cache of one tokenizer holds before it starts over: bounded by
#: size, not by count, so long reasoning or tool outputs (a 50,000-token turn is ~200 KB of
#: text and ~200 KB of ids) cannot grow a map worker by GBs.
CACHE_BYTES = 32 << 20
#: A piece larger than this share of the cache is encoded but not kept.
LARGEST_SHARE = 4
#: Texts per process checked against the tokenizer's own ``encode`` before trusting the pieces.
CHECKED_TEXTS = 16


class SegmentEncoder:
    """``encode(text)`` equal to ``tokenizer.encode(text, add_special_tokens=False)``."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.backend = getattr(tokenizer, "backend_tokenizer", None)
        self.pieces: dict[str, array[int]] = {}
        self.held = 0  # bytes of text and ids in ``pieces``
        self.to_check = CHECKED_TEXTS
        self.splitter, self.special_ids = self._added_tokens()
        self.longest = max(map(len, self.special_ids), default=0)
        # the previous text, its ids, and where its added tokens end: (character, ids so far)
        self.last_text = ""
        self.last_ids: list[int] = []
        self.cut_ends: list[int] = []
        self.cut_counts: list[int] = []

    def _added_tokens(self) -> tuple[re.Pattern[str] | None, dict[str, int]]:
        if self.backend is None or getattr(self.tokenizer, "split_special_tokens", False):
            return None, {}
        try:
            added = self.backend.get_added_tokens_decoder()
        except AttributeError:
            return None, {}
        for token in added.values():
            if token.lstrip or token.rstrip or token.single_word or token.normalized:
                return None, {}
        ids = {token.content: index for index, token in added.items() if token.content}
        if not ids:
            return None, {}
        # longest first: at one position the regex takes the first alternative that matches
        contents = sorted(ids, key=len, reverse=True)
        return re.compile("(" + "|".join(map(re.escape, contents)) + ")"), ids

    def encode(self, text: str) -> list[int]:
        if self.splitter is None:
            return self._whole(text)
        ids = self._by_pieces(text)
        if self.to_check:
            self.to_check -= 1
            whole = self._whole(text)
            if ids != whole:
                log.warning(
                    "local rendering: this tokenizer's ids are not the ids of the pieces "
                    "between its special tokens; encoding whole texts from now on"
                )
                self.splitter = None
                return whole
        return ids

    def _whole(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def _by_pieces(self, text: str) -> list[int]:
        cuts = self._reusable_cuts(text)  # the previous text's first cuts that still hold
        ends, counts = self.cut_ends[:cuts], self.cut_counts[:cuts]
        at = ends[-1] if cuts else 0
        ids = self.last_ids[: counts[-1]] if cuts else []
        rest = text[at:] if at else text
        for index, piece in enumerate(self.splitter.split(rest)):  # type: ignore[union-attr]
            at += len(piece)
            if index % 2:  # odd parts are the captured added tokens
                ids.append(self.special_ids[piece])
                ends.append(at)
                counts.append(len(ids))
            elif piece:
                known = self.pieces.get(piece)
                if known is None:
                    known = array("i", self.backend.encode(piece, add_special_tokens=False).ids)
                    self._keep(piece, known)
                ids.extend(known)
        self.last_text, self.last_ids, self.cut_ends, self.cut_counts = text, ids, ends, counts
        return list(ids)

    def _reusable_cuts(self, text: str) -> int:
        """How many of the previous text's cuts (added-token ends) hold for the new text too:
        those such that every position scanned before them sees only characters the two texts
        share (an added token is matched leftmost-longest, looking at most ``longest``
        characters ahead); the new text's split starts over at the last of them."""
        shared = _common_prefix(self.last_text, text)
        return bisect.bisect_right(self.cut_ends, shared - self.longest + 1)

    def _keep(self, piece: str, known: array[int]) -> None:
        size = sys.getsizeof(piece) + sys.getsizeof(known)
        if size * LARGEST_SHARE > CACHE_BYTES:
            return
        if self.held + size > CACHE_BYTES:
            self.pieces.clear()
            self.held = 0
        self.pieces[piece] = known
        self.held += size


def _common_prefix(first: str, second: str) -> int:
    """The length of the longest common prefix, by bisection over C-level comparisons."""
    low, high = 0, min(len(first), len(second))
    if first[:high] == second[:high]:
        return high
    while high - low > 1:  # first[:low] == second[:low], first[:high] != second[:high]
        middle = (low + high) // 2
        if first[low:middle] == second[low:middle]:
            low = middle
        else:
            high = middle
    return low


_encoders: dict[int, SegmentEncoder] = {}


def encode(tokenizer: Any, text: str) -> list[int]:
    """The ids of ``text`` without added special tokens, as ``tokenizer.encode`` gives them."""
    encoder = _encoders.get(id(tokenizer))
    if encoder is None or encoder.tokenizer is not tokenizer:
        encoder = _encoders[id(tokenizer)] = SegmentEncoder(tokenizer)
    return encoder.encode(text)
