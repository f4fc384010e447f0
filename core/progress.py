"""A progress bar for long batches (``python -m core analyze --batch``, ``python -m bench``).

On a terminal it redraws one line (``label [#####.....] done/total  elapsed``) with carriage returns; when the
stream is not a terminal (CI logs, a file) it prints a plain line at most every 10 % instead, so logs are not
flooded with carriage returns.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """Progress of ``total`` steps on ``stream`` (default stderr). ``update(done)`` redraws; the last update
    (``done >= total``) ends the line. ``tty``: force terminal (True) or log (False) behaviour; by default
    ``stream.isatty()``."""

    def __init__(self, total: int, label: str, stream: TextIO | None = None, tty: bool | None = None,
                 width: int = 30):
        self.total = max(0, total)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        if tty is None:
            try:
                tty = self.stream.isatty()
            except (AttributeError, ValueError):
                tty = False
        self.tty = tty
        self.width = width
        self.t0 = time.perf_counter()
        self._next_log = 0

    def update(self, done: int) -> None:
        """Show ``done`` of ``total`` steps done (values above ``total`` count as ``total``)."""
        total = max(1, self.total)
        done = min(done, self.total)
        elapsed = time.perf_counter() - self.t0
        if self.tty:
            filled = int(self.width * done / total)
            bar = "#" * filled + "." * (self.width - filled)
            end = "\n" if done >= self.total else ""
            self.stream.write(f"\r{self.label} [{bar}] {done}/{self.total}  {elapsed:5.1f} s{end}")
            self.stream.flush()
            return
        pct = 100 * done // total
        if pct >= self._next_log:
            self.stream.write(f"{self.label}: {done}/{self.total} ({pct} %)  {elapsed:.1f} s\n")
            self.stream.flush()
            self._next_log = (pct // 10 + 1) * 10 if done < self.total else 101
