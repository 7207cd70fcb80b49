"""A real full disk for tests: a small tmpfs mounted for one test, and a file that fills it.

    with small_disk() as disk:             # a 20 MiB tmpfs, unmounted (umount -l) afterwards
        filler = fill(disk / "filler", leave=2 * MIB)   # all the free space but 2 MiB
        ...                                 # write until the disk refuses
        filler.unlink()                     # space is back

Mounting needs root (CI runs as root). Elsewhere, or where mount fails, the test is skipped
with the reason, except under ``CI=true``, where it fails: CI must not lose these tests
silently. Nothing here mocks the disk: writes fail because the filesystem is full.
"""

from __future__ import annotations

import errno
import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

MIB = 1024 * 1024
_CHUNK = MIB


def skip_or_fail(reason: str) -> None:
    """Skip the test with ``reason``, or fail it under CI=true."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: this test must run)")
    pytest.skip(reason)


@contextmanager
def small_disk(size: str = "20m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on a new directory, for the ``with`` block."""
    if os.geteuid() != 0:
        skip_or_fail("mounting a small tmpfs needs root (run the tests as root, as CI does)")
    directory = Path(tempfile.mkdtemp(prefix="twainmq-full-disk-"))
    command = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except OSError as error:
        done = subprocess.CompletedProcess(command, 1, "", str(error))
    if done.returncode != 0:
        directory.rmdir()
        skip_or_fail(f"{' '.join(command)} failed: {done.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], capture_output=True, timeout=30)
        directory.rmdir()


def free_bytes(path: Path) -> int:
    """The bytes still free on the filesystem of ``path``."""
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def fill(path: Path, leave: int = 0) -> Path:
    """Write ``path`` until at most ``leave`` bytes of its filesystem are free (rounded down to
    the filesystem's blocks); return it. ``leave=0``: until the disk refuses."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while (room := free_bytes(path) - leave) > 0:
            try:
                os.write(fd, bytes(min(room, _CHUNK)))
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                break
    finally:
        os.close(fd)
    return path
