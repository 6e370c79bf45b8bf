"""Tokenizing rendered chats piece by piece, each piece between special tokens once per process.

Target: ``render.render_ids`` (the local stand-in for vLLM's render endpoint, speculators 0.8+).
Why: speculators 0.8/0.9 derive a loss mask from one render request per conversation prefix
(``_render_boundary_rows``, docs/upstream.md), so a conversation of k turns tokenizes its first
turn k times, and every agentic conversation re-tokenizes the same system prompt and tool
list. Profiled on the benchmark mix (bench/, 0.9.0, ``--render-endpoint local``), the
tokenizer's ``encode`` was three quarters of a map worker's time.

Shape it needs: a fast tokenizer (``backend_tokenizer``) whose added tokens all match as plain
text (no ``lstrip``/``rstrip``/``single_word``, not normalized) and that does not split special
tokens. Such a tokenizer cuts its input at every added token before normalizing and
pre-tokenizing (the ``tokenizers`` library's added-vocabulary pass, leftmost-longest match), so
the ids of a text are the ids of its pieces laid end to end; a piece seen before is looked up.
Anything else (and any tokenizer whose first texts do not come out identical to its own
``encode``, checked per process) is encoded whole, exactly as before.
"""

from __future__ import annotations

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
        ids: list[int] = []
        for index, piece in enumerate(self.splitter.split(text)):  # type: ignore[union-attr]
            if index % 2:  # odd parts are the captured added tokens
                ids.append(self.special_ids[piece])
            elif piece:
                known = self.pieces.get(piece)
                if known is None:
                    known = array("i", self.backend.encode(piece, add_special_tokens=False).ids)
                    self._keep(piece, known)
                ids.extend(known)
        return ids

    def _keep(self, piece: str, known: array[int]) -> None:
        size = sys.getsizeof(piece) + sys.getsizeof(known)
        if size * LARGEST_SHARE > CACHE_BYTES:
            return
        if self.held + size > CACHE_BYTES:
            self.pieces.clear()
            self.held = 0
        self.pieces[piece] = known
        self.held += size


_encoders: dict[int, SegmentEncoder] = {}


def encode(tokenizer: Any, text: str) -> list[int]:
    """The ids of ``text`` without added special tokens, as ``tokenizer.encode`` gives them."""
    encoder = _encoders.get(id(tokenizer))
    if encoder is None or encoder.tokenizer is not tokenizer:
        encoder = _encoders[id(tokenizer)] = SegmentEncoder(tokenizer)
    return encoder.encode(text)
