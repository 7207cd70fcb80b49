"""Batched fsync for ``fsync="batch"``: one background thread syncs what a producer wrote.

(Databases call this group commit; the name here keeps it apart from a consumer group's
committed offsets, ``groups/commits.py``.)

Writers only mark a partition dirty (an attribute store); every ``interval`` seconds the
thread syncs the dirty partitions. The flag is cleared *before* the sync, so a write that
lands meanwhile either is covered by that sync (it reached the kernel first) or leaves the
flag set for the next round: no write is ever skipped. ``fdatasync`` releases the GIL, so the
writer keeps writing while the disk works. A sync that fails sets the flag again (the next
round tries again) and is raised once by the producer's next ``flush()``/``close()``: a disk
that was full or failing syncs again once it recovers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from .partition import PartitionLog


class FsyncBatcher:
    """Syncs dirty partitions of one producer every ``interval`` seconds until stopped."""

    def __init__(self, logs: Callable[[], list[PartitionLog]], interval: float) -> None:
        self._logs = logs
        self._interval = interval
        self._stop = threading.Event()
        self.error: OSError | None = None
        self._thread = threading.Thread(target=self._run, name="twainmq-fsync-batch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.sync_dirty()
            except OSError as exc:  # a failed sync: the producer raises it on flush/close
                self.error = exc

    def sync_dirty(self) -> None:
        """Sync every partition written since its last sync."""
        for log in self._logs():
            if log.dirty:
                log.dirty = False
                try:
                    log.sync()
                except OSError:
                    log.dirty = True
                    raise

    def check(self) -> None:
        """Raise the error of a background sync that failed since the last check, if any."""
        error, self.error = self.error, None
        if error is not None:
            raise error

    def cancel(self) -> None:
        """Let the thread end without a last sync and without waiting for it (the producer
        was collected unclosed; this may run on any thread, this one included)."""
        self._stop.set()

    def stop(self) -> None:
        """Stop the thread, then sync what is still dirty (raising a failed sync's error)."""
        self._stop.set()
        self._thread.join()
        self.check()
        self.sync_dirty()
