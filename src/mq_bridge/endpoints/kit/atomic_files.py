"""Replacing a file atomically: readers see the old content or the new, never a mix.

    with replaced_atomically(path) as file:
        file.write(new_content)

The steps, as the engine's own atomic writes take them (twainmq keeps its helper private,
and its errors are the engine's, so the bridge has this one)::

    write <dir>/.<name>.<pid>.<thread>.tmp   a name no other writer (process or thread) uses
    fsync it                                  its bytes are on disk before any name points at them
    os.replace(temp, path)                    atomic: readers see the old or the new file
    fsync <dir>                               the rename itself survives a power cut

If the block raises, `path` is untouched and the temporary file is removed. Of two threads
replacing the same file at once, the last rename wins, and its content is whole.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

__all__ = ["replaced_atomically"]


@contextmanager
def replaced_atomically(path: Path) -> Iterator[BinaryIO]:
    """A file to write the new content of `path` to; it replaces `path` when the block ends."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(temporary, "wb") as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
