"""Files written atomically: a reader sees the old file or the new one, never half of one.

Every small file the engine rewrites goes through ``write_file_atomically``: topic configs,
group state, committed offsets, rebuilt segment indexes. The steps, and why each is there::

    write <dir>/.<name>.<pid>.<thread>.tmp   a name no other writer (process or thread) uses
    fsync it                                  its bytes are on disk before any name points at them
    os.replace(temp, path)                    atomic: readers see the old or the new file
      or os.link(temp, path) + unlink(temp)   exclusive: fails if path exists (two creators)
    fsync <dir>                               the rename itself survives a power cut

JSON documents read back (group state, committed offsets) carry a ``"crc32"`` member: the
CRC-32 (8 hex digits) of the document without it, serialized canonically (sorted keys, no
spaces), so any changed value, cut or appended byte is detected (``read_checked_json`` raises
``FileChecksumError``) while the file stays readable JSON. Documents written before checksums
are accepted only with exactly their old set of keys.

``fsync=False`` skips both fsyncs: the write is still atomic and survives a process crash, not
necessarily a power cut. A write that fails removes its temporary file; a process killed
mid-write can leave one behind (a dot-file ending in ``.tmp``, which no reader looks at).
A write the disk refuses (ENOSPC, EDQUOT, EIO, or a short write) raises ``StorageFullError``
or ``StorageIOError`` (retriable), and ``path`` is as it was.
"""

from __future__ import annotations

import json
import os
import threading
import zlib
from pathlib import Path
from typing import Any

from .errors import raise_storage_error, short_write


def write_file_atomically(
    path: Path, data: bytes, *, fsync: bool = True, exclusive: bool = False
) -> None:
    """Replace ``path`` with ``data`` atomically (the steps are in the module docstring).

    ``exclusive=True`` creates ``path`` instead, raising FileExistsError if it exists: of two
    concurrent creators exactly one succeeds, and neither ever sees the other's half-written
    file.
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            try:
                _write_all(fd, data, path)
                if fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            if exclusive:
                os.link(temporary, path)
                os.unlink(temporary)
            else:
                os.replace(temporary, path)
        except BaseException:
            _unlink_quietly(temporary)
            raise
        if fsync:
            fsync_directory(path.parent)
    except OSError as error:
        raise_storage_error(error, path, "writing")


def write_json_atomically(path: Path, document: Any, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``document`` as JSON (sorted keys, one-space indent).

    The document is serialized before any file is touched, so a document that cannot be
    serialized leaves ``path`` as it was.
    """
    data = json.dumps(document, indent=1, sort_keys=True).encode()
    write_file_atomically(path, data, fsync=fsync)


CHECKSUM_KEY = "crc32"


class FileChecksumError(ValueError):
    """A file read back that is not what was written: ``path`` and ``reason`` say why."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def _document_crc(document: dict[str, Any]) -> str:
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return f"{zlib.crc32(canonical.encode()):08x}"


def write_checked_json_atomically(
    path: Path, document: dict[str, Any], *, fsync: bool = True, exclusive: bool = False
) -> None:
    """Replace (or, ``exclusive``, create) ``path`` with ``document`` and its checksum."""
    signed = {**document, CHECKSUM_KEY: _document_crc(document)}
    data = json.dumps(signed, indent=1, sort_keys=True).encode()
    write_file_atomically(path, data, fsync=fsync, exclusive=exclusive)


def read_checked_json(path: Path, legacy_keys: frozenset[str]) -> dict[str, Any] | None:
    """The checksummed JSON object at ``path`` (without its checksum), or None if the file
    does not exist. A document without a checksum is accepted only if its keys are exactly
    ``legacy_keys`` (as written before checksums). Raises FileChecksumError."""
    try:
        with open(path, "rb") as file:
            raw = file.read(1 << 24)
    except FileNotFoundError:
        return None
    try:
        document = json.loads(raw)
    except ValueError as exc:  # also bad UTF-8
        raise FileChecksumError(path, f"not valid JSON ({exc})") from None
    if not isinstance(document, dict):
        raise FileChecksumError(path, "not a JSON object")
    if CHECKSUM_KEY not in document:
        if set(document) != legacy_keys:
            raise FileChecksumError(path, "no checksum, and not a file of an older version")
        return document
    stored = document.pop(CHECKSUM_KEY)
    computed = _document_crc(document)
    if stored != computed:
        raise FileChecksumError(
            path, f"checksum mismatch (stored {stored!r}, computed {computed!r})"
        )
    return document


def read_json(path: Path) -> Any | None:
    """The JSON document at ``path``, or None if the file does not exist."""
    try:
        with open(path, "rb") as file:
            return json.loads(file.read())
    except FileNotFoundError:
        return None


def fsync_directory(path: Path) -> None:
    """Make a directory's entries (new, renamed or removed files) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes, path: Path) -> None:
    # os.write may write less than asked (a full disk): a short file would be renamed over a
    # good one. A regular file's write is not cut short by a signal, so a short write means
    # the disk is full (the next write would raise ENOSPC): say so instead.
    written = os.write(fd, data)
    if written != len(data):
        raise short_write(path, "writing", written, len(data))


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
