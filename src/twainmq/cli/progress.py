"""Progress of a long phase (produce, consume, the demo's phases) on stderr.

Shown when asked (``--progress``) or, by default, when stderr is a terminal (and, for a
phase that prints to stdout, stdout is not the terminal too). On a terminal the line is
rewritten in place and cleared by `Progress.finish`; elsewhere, or when stdout is a
terminal the phase prints to, it is whole lines, one per interval, so a message printed
to stdout never lands in the middle of a progress line.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TextIO

__all__ = ["Progress", "add_progress_option"]

_INTERVAL_SECONDS = 0.5
#: Look at the clock once per this many items: an update stays a few nanoseconds.
_CHECK_EVERY = 256


def add_progress_option(parser: argparse.ArgumentParser) -> None:
    """``--progress`` / ``--no-progress`` (default: when stderr is a terminal)."""
    parser.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=None,
        help="show progress on stderr (default: when stderr is a terminal)",
    )  # fmt: skip


class Progress:
    """Counts something (`noun`) and shows the count and rate every half second."""

    def __init__(
        self,
        noun: str,
        wanted: bool | None,
        prints_to_stdout: bool = False,
        stream: TextIO | None = None,
    ) -> None:
        self.stream = stream or sys.stderr
        self.noun = noun
        terminal = self.stream.isatty()
        # Messages on the same terminal already show progress; a line between them is noise.
        shared_terminal = prints_to_stdout and sys.stdout.isatty()
        self.enabled = terminal and not shared_terminal if wanted is None else wanted
        self.live = terminal and not shared_terminal
        self.count = 0
        self._checked_at = 0
        self._started = self._last_shown = time.monotonic()
        self._shown_live = False

    def update(self, count: int) -> None:
        """Record that `count` items are done so far; show them if the interval passed."""
        self.count = count
        if not self.enabled or count - self._checked_at < _CHECK_EVERY:
            return
        self._checked_at = count
        now = time.monotonic()
        if now - self._last_shown >= _INTERVAL_SECONDS:
            self._last_shown = now
            self._show(now)

    def finish(self) -> None:
        """Clear the live line, so what is printed next starts on a line of its own."""
        if self._shown_live:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown_live = False

    def _show(self, now: float) -> None:
        seconds = max(now - self._started, 1e-9)
        line = f"{self.count:,} {self.noun} ({self.count / seconds:,.0f}/s, {seconds:.0f} s)"
        if self.live:
            self.stream.write("\r\x1b[K" + line)
            self._shown_live = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
