"""Counting the syncs a test causes: every ``os.fdatasync``/``os.fsync`` is recorded, then done.

Durability tests use this to check how many syncs each ``fsync`` mode makes and when, so
that a sync quietly removed (or moved after the acknowledgement) fails a test. A test module
makes its fixture with ``record_syncs(monkeypatch)``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest


@dataclass
class Sync:
    call: str  # "fdatasync" or "fsync"
    path: str  # the synced file or directory
    thread: str  # the name of the thread that synced
    committed: int | None  # what `SyncLog.committed` said at that moment (None: not asked)


@dataclass
class SyncLog:
    """Every sync of this process since the fixture started, in order.

    Set `committed` to a function (e.g. reading a partition's head) to have each sync of a
    file whose name ends in `watch_suffix` note its value at the moment of the sync.
    """

    syncs: list[Sync] = field(default_factory=list)
    committed: Callable[[], int] | None = None
    watch_suffix: str = ".log"

    def of_files(self, suffix: str) -> list[Sync]:
        return [s for s in self.syncs if s.path.endswith(suffix)]

    def of_directories(self) -> list[Sync]:
        return [s for s in self.syncs if os.path.isdir(s.path)]


def record_syncs(monkeypatch: pytest.MonkeyPatch) -> SyncLog:
    """Record (and still perform) every ``os.fdatasync`` and ``os.fsync`` until the test ends."""
    log = SyncLog()
    lock = threading.Lock()

    def recording(call: str, real: Callable[[int], None]) -> Callable[[int], None]:
        def sync(fd: int) -> None:
            path = os.readlink(f"/proc/self/fd/{fd}")
            watched = log.committed is not None and path.endswith(log.watch_suffix)
            committed = log.committed() if watched and log.committed else None
            with lock:
                log.syncs.append(Sync(call, path, threading.current_thread().name, committed))
            real(fd)

        return sync

    monkeypatch.setattr(os, "fdatasync", recording("fdatasync", os.fdatasync))
    monkeypatch.setattr(os, "fsync", recording("fsync", os.fsync))
    return log
