"""Replacing a file atomically: readers see the old content or the new, never a mix.

    with replaced_atomically(path) as file:
        file.write(new_content)

writes a temporary file beside `path`, fsyncs it, renames it over `path` and fsyncs the
directory, so the replacement also survives a power loss. If the block raises, `path` is
untouched and the temporary file is removed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

__all__ = ["replaced_atomically"]


@contextmanager
def replaced_atomically(path: Path) -> Iterator[BinaryIO]:
    """A file to write the new content of `path` to; it replaces `path` when the block ends."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
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
