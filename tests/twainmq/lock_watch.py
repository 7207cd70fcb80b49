"""Seeing, from outside, that a writer is blocked waiting for a partition's lock.

A writer that finds the lock busy sets the "wanted" byte of the partition's head page and
tries again, re-setting it before each try (``partition.py``, ``_wait_for_lock``). Clearing
the byte and seeing it set again therefore proves that the waiter made another try, which
means the try before it failed: the lock was still held. Tests count such refused tries
instead of sleeping and guessing that the waiter is waiting.
"""

from __future__ import annotations

import mmap
import os
import time
from collections.abc import Callable
from pathlib import Path

WANTED = 64  # the byte's position in the head page (partition.py's _WANTED)


class LockWatch:
    """Watches the "wanted" byte of one partition's head file."""

    def __init__(self, head: Path) -> None:
        fd = os.open(head, os.O_RDWR)
        try:
            self._page = mmap.mmap(fd, mmap.PAGESIZE)
        finally:
            os.close(fd)

    def refused_tries(self, tries: int, got_in: Callable[[], bool], seconds: float = 60.0) -> int:
        """Wait until the waiter has tried `tries` more times; return how many it made.

        Returns early (fewer) as soon as `got_in()` says the waiter got the lock (it wrote or
        exited); fails after `seconds` when the waiter stops trying without getting in.
        """
        deadline = time.monotonic() + seconds
        for seen in range(tries):
            self._page[WANTED] = 0
            while not self._page[WANTED]:
                if got_in():
                    return seen
                assert time.monotonic() < deadline, "nobody tried to take the lock"
                time.sleep(0.0005)
        return tries

    def close(self) -> None:
        self._page.close()
