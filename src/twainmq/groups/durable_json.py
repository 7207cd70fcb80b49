"""Small JSON documents replaced atomically: a reader sees the old or the new file, never half.

Write to a temporary file in the same directory, fsync it, ``os.replace`` it
over the target, then fsync the directory so the rename itself survives a
power cut.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any


def write_json_atomic(path: Path, document: Any, durable: bool = True) -> None:
    """Replace ``path`` with ``document`` serialized as JSON.

    ``durable=False`` skips the fsyncs: the replace is still atomic and survives
    a process crash, but not necessarily a power cut.
    """
    data = json.dumps(document, indent=1, sort_keys=True).encode()
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    if durable:
        _fsync_directory(path.parent)


def read_json(path: Path) -> Any | None:
    """The JSON document at ``path``, or None if the file does not exist."""
    try:
        with open(path, "rb") as file:
            return json.loads(file.read())
    except FileNotFoundError:
        return None


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
