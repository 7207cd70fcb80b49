"""Advisory file locks (flock) as the group's source of truth for liveness and ownership.

flock locks belong to an open file description, so two threads that open the
same file separately exclude each other just as two processes do, and the
kernel drops every lock of a process the moment it dies, even by ``kill -9``.
That last property is why a free lock proves its former holder is gone.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def exclusive_lock(path: Path, timeout: float | None = None) -> Iterator[bool]:
    """Hold an exclusive lock on ``path`` (created if missing); yields whether it was granted.

    ``timeout=None`` waits as long as it takes; otherwise gives up after
    ``timeout`` seconds (0: one attempt) and yields False.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        yield _acquire(fd, timeout)
    finally:
        os.close(fd)


def _acquire(fd: int, timeout: float | None) -> bool:
    if timeout is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return True
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.001)


def try_lock(path: Path, create: bool = True) -> int | None:
    """Lock ``path`` without waiting; return the open descriptor, or None if held elsewhere.

    The caller owns the descriptor: closing it releases the lock. With
    ``create=False`` a missing file raises FileNotFoundError.
    """
    flags = os.O_RDWR | (os.O_CREAT if create else 0)
    fd = os.open(path, flags, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd
