"""A one-line progress bar on stderr while the requests run (standard library only).

Why: a measurement of a few hundred long replies takes minutes; the bar redraws in place on a
terminal. Elsewhere (a log, a pipe) it writes one line per endpoint when it is done, so logs
stay readable.
"""

from __future__ import annotations

import time
from typing import TextIO

WIDTH = 30


class Progress:
    """``tick()`` per answered request of ``total``; ``close()`` ends the line."""

    def __init__(self, label: str, total: int, out: TextIO) -> None:
        self.label, self.total, self.out = label, total, out
        self.done = 0
        self.start = time.monotonic()
        self.live = out.isatty()
        self._draw()

    def tick(self) -> None:
        self.done += 1
        self._draw()

    def note(self, line: str) -> None:
        """A line of its own above the bar (a warning), the bar redrawn under it."""
        self.out.write(("\r\033[K" if self.live else "") + line + "\n")
        self._draw()

    def _line(self) -> str:
        filled = WIDTH * self.done // max(self.total, 1)
        bar = "#" * filled + "." * (WIDTH - filled)
        seconds = time.monotonic() - self.start
        return f"{self.label} [{bar}] {self.done}/{self.total} requests {seconds:.0f} s"

    def _draw(self) -> None:
        if self.live:
            self.out.write("\r" + self._line())
            self.out.flush()

    def close(self) -> None:
        self.out.write(("\r" if self.live else "") + self._line() + "\n")
        self.out.flush()
