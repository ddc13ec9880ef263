"""Progress of a Maven download, told the way pip and Maven users expect.

Fed Maven's batch-mode output line by line (``Downloaded from central: URL (1.2 MB at 3 MB/s)``), it
says what is being downloaded when it starts, then how many files and bytes have arrived: a counter
redrawn in place on a terminal, otherwise a plain line every few seconds (so captured output, a CI log
or pytest's report, gets whole lines and no carriage returns), and a closing line with the totals.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TextIO

_DOWNLOADED = re.compile(r"Downloaded from \S+: (\S+) \((\d+(?:\.\d+)?) (B|kB|MB|GB)\b")
_UNITS = {"B": 1, "kB": 1_000, "MB": 1_000_000, "GB": 1_000_000_000}


def is_transfer_line(line: str) -> bool:
    """Maven's per-file chatter (downloads and copies), which an error report can leave out."""
    return "Downloading from " in line or "Downloaded from " in line or "] Copying " in line


class DownloadProgress:
    """Tells ``stream`` how a download of ``what`` goes; ``terminal`` defaults to ``stream.isatty()``."""

    # A terminal redraw at most this often; a plain line at most every ``line_every`` seconds.
    redraw_every = 0.1

    def __init__(self, what: str, stream: TextIO, *, terminal: bool | None = None, line_every: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.what, self.stream, self.line_every, self.clock = what, stream, line_every, clock
        self.terminal = _isatty(stream) if terminal is None else terminal
        self.files = 0
        self.size = 0.0
        self._started = self._last_told = clock()
        self._drawn = 0  # characters of the counter now on the terminal's line

    def start(self, into: str) -> None:
        self._say(f"downloading {self.what} with Maven into {into} (once; later runs use that cache)")

    def feed(self, line: str) -> None:
        match = _DOWNLOADED.search(line)
        if match is None:
            return
        self.files += 1
        self.size += float(match.group(2)) * _UNITS[match.group(3)]
        now = self.clock()
        if self.terminal and now - self._last_told >= self.redraw_every:
            self._draw(f"  {self._so_far()}: {match.group(1).rsplit('/', 1)[-1]}"[:78])
            self._last_told = now
        elif not self.terminal and now - self._last_told >= self.line_every:
            self._say(f"  ... {self._so_far()} so far ({now - self._started:.0f} s)")
            self._last_told = now

    def finish(self, ok: bool) -> None:
        self._draw("")
        if ok:
            fetched = self._so_far() if self.files else "nothing new (Maven had every file)"
            self._say(f"downloaded {self.what}: {fetched} in {self.clock() - self._started:.0f} s")

    def _so_far(self) -> str:
        return f"{self.files} file{'s' if self.files != 1 else ''}, {self.size / 1_000_000:.1f} MB"

    def _say(self, text: str) -> None:
        self._draw("")
        self.stream.write(text + "\n")
        self.stream.flush()

    def _draw(self, text: str) -> None:
        """Replace the counter on the terminal's current line with ``text`` (blank clears it)."""
        if not self.terminal or (not text and not self._drawn):
            return
        self.stream.write("\r" + text.ljust(self._drawn) + ("" if text else "\r"))
        self.stream.flush()
        self._drawn = len(text)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or bare file-like object
        return False
