"""Gives back partition locks that producers hold lazily once they stop writing.

A producer keeps a partition's ``flock`` between writes (see ``partition.py``): that saves two
syscalls a write. Another writer asks for the lock through the head's "wanted" flag, which the
holder checks after each write; this thread covers the holder that stops writing: every tick
it releases each lazily held lock that was not used since the previous tick. A tick starts at
1 ms and doubles up to 16 ms while every holder keeps writing (measured: waking every 1 ms
costs a busy writer 5-10% on a loaded machine, through GIL hand-offs); so a lock sits idle
for at most about 16 ms after a long burst, 2 ms after a single write. The thread runs only
while some lock is held lazily.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Protocol

TICK_SECONDS, MAX_TICK_SECONDS = 0.001, 0.016


class LazyHolder(Protocol):
    """What the releaser needs of a partition (``PartitionLog``)."""

    def release_if_idle(self) -> bool:
        """Release the lock if it was not used since the last call; else mark it unused and
        return True (busy)."""

    def forget_lock_after_fork(self) -> None:
        """In a forked child: the parent owns the lock; stop believing this copy holds it."""


class IdleReleaser:
    """One daemon thread per process releasing idle lazily held locks."""

    def __init__(self) -> None:
        # Reentrant: the garbage collector may run the finalizer of an unclosed producer
        # (``unclosed.py``) on this thread while it holds the mutex, and that discards holders.
        self._holders: set[LazyHolder] = set()
        self._mutex = threading.RLock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, holder: LazyHolder) -> None:
        """Watch ``holder``, which just took its lock lazily."""
        with self._mutex:
            self._holders.add(holder)
            self._wake.set()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="twainmq-idle-release", daemon=True
                )
                self._thread.start()

    def discard(self, holder: LazyHolder) -> None:
        """Stop watching ``holder`` (it released its lock)."""
        with self._mutex:
            self._holders.discard(holder)

    def _run(self) -> None:
        tick = TICK_SECONDS
        while True:
            self._wake.wait()
            time.sleep(tick)
            with self._mutex:
                holders = list(self._holders)
                if not holders:
                    self._wake.clear()  # under the mutex, so an add() cannot be missed
            busy = [holder.release_if_idle() for holder in holders]
            all_busy = bool(busy) and all(busy)
            tick = min(tick * 2, MAX_TICK_SECONDS) if all_busy else TICK_SECONDS

    def after_fork_in_child(self) -> None:
        """The child has no releaser thread and owns none of the parent's locks."""
        holders, self._holders = self._holders, set()
        self._mutex = threading.RLock()
        self._wake = threading.Event()
        self._thread = None
        for holder in holders:
            holder.forget_lock_after_fork()


RELEASER = IdleReleaser()
os.register_at_fork(after_in_child=RELEASER.after_fork_in_child)
