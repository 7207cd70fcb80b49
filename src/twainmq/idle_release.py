"""Gives back partition locks that producers hold lazily once they stop writing.

A producer keeps a partition's ``flock`` between writes (see ``partition.py``): that saves two
syscalls a write. Another writer asks for the lock through the head's "wanted" flag, which the
holder checks after each write; this thread covers the holder that stops writing: every tick
it releases each lazily held lock that was not used since the previous tick. So a lock sits
idle for at most two ticks. The thread runs only while some lock is held lazily.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Protocol

TICK_SECONDS = 0.001


class LazyHolder(Protocol):
    """What the releaser needs of a partition (``PartitionLog``)."""

    def release_if_idle(self) -> None:
        """Release the lock if it was not used since the last call; else mark it unused."""

    def forget_lock_after_fork(self) -> None:
        """In a forked child: the parent owns the lock; stop believing this copy holds it."""


class IdleReleaser:
    """One daemon thread per process releasing idle lazily held locks."""

    def __init__(self) -> None:
        self._holders: set[LazyHolder] = set()
        self._mutex = threading.Lock()
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
        while True:
            self._wake.wait()
            time.sleep(TICK_SECONDS)
            with self._mutex:
                holders = list(self._holders)
                if not holders:
                    self._wake.clear()  # under the mutex, so an add() cannot be missed
            for holder in holders:
                holder.release_if_idle()

    def after_fork_in_child(self) -> None:
        """The child has no releaser thread and owns none of the parent's locks."""
        holders, self._holders = self._holders, set()
        self._mutex = threading.Lock()
        self._wake = threading.Event()
        self._thread = None
        for holder in holders:
            holder.forget_lock_after_fork()


RELEASER = IdleReleaser()
os.register_at_fork(after_in_child=RELEASER.after_fork_in_child)
