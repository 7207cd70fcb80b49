"""The durable log start of a partition: the oldest offset retention keeps.

Without it, a partition whose oldest segment files were deleted by hand looks exactly like one
whose old segments retention deleted, and a reader would move up to the oldest kept offset in
silence. So retention records, before it deletes anything, the first offset it keeps, in
``<partition>/log-start`` (20 bytes, replaced atomically)::

    | magic "TWSTART1" | log_start i64 | crc32 u32 of the 16 bytes before it |

Readers then know: offsets below the log start were removed on purpose (move up to it);
offsets between the log start and the oldest segment file were lost (TopicCorruptError
naming the missing segment, or skipped with a warning under ``on_gap="skip"``). A partition
without the file never had segments deleted by retention: its log start is 0. Partitions of
stores written before this file existed get one, at their oldest segment, when they are first
opened (recovery upgrades them once). Written by retention before deleting (a crash in between
leaves the log start above the oldest segments, which the next retention run deletes).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from .atomic_files import write_file_atomically
from .errors import TopicCorruptError

LOG_START_NAME = "log-start"
_MAGIC = b"TWSTART1"
_FORMAT = struct.Struct("<8sqI")


def log_start_path(directory: Path) -> Path:
    """The log-start file of a partition directory."""
    return directory / LOG_START_NAME


def read_log_start(directory: Path) -> int:
    """The partition's durable log start (0 if retention never deleted a segment).

    Raises TopicCorruptError naming the file if it is damaged.
    """
    path = log_start_path(directory)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    if len(data) != _FORMAT.size:
        raise TopicCorruptError(path, -1, f"log-start file of {len(data)} bytes, not 20")
    magic, offset, crc = _FORMAT.unpack(data)
    if magic != _MAGIC or zlib.crc32(data[:16]) != crc or offset < 0:
        raise TopicCorruptError(path, -1, "log-start file fails its checksum")
    return int(offset)


def write_log_start(directory: Path, offset: int, fsync: bool = True) -> None:
    """Record ``offset`` as the partition's durable log start (atomically)."""
    head = struct.pack("<8sq", _MAGIC, offset)
    data = head + struct.pack("<I", zlib.crc32(head))
    write_file_atomically(log_start_path(directory), data, fsync=fsync)
