"""Every error twainmq raises, under one root.

    TwainMQError
    ├── InvalidTopicNameError      (also ValueError)   name: only [A-Za-z0-9._-], no leading "."
    ├── TopicExistsError                               create_topic on an existing topic
    ├── UnknownTopicError          (also LookupError)  the topic has no config file
    ├── TopicConfigError                               a .twc file that cannot be read or is invalid
    │   ├── TopicConfigCorruptError                    its checksum fails: damaged (or hand-edited)
    │   └── TopicConfigMismatchError                   its name, partitions or key type disagree
    │                                                  with its file name or the topic's data
    ├── TopicCorruptError                              a bad record or a gap in acknowledged data
    ├── InvalidKeyTypeError        (also ValueError)   key_type not u8/u16/u32/u64/charN
    ├── InvalidKeyError            (also ValueError)   key of the wrong type, range or length
    ├── InvalidPartitionError      (also ValueError)   partition number outside the topic
    ├── OffsetOutOfRangeError      (also ValueError)   seek beyond the end of a partition
    ├── MessageTooLargeError       (also ValueError)   payload above the topic's max_message_bytes
    ├── InvalidMessageError        (also ValueError)   str with a lone surrogate, cyclic dataclass
    ├── MessageTypeError           (also TypeError)    payload is not str, bytes or a dataclass
    │   └── UnregisteredMessageTypeError               dataclass type not registered / not declared
    ├── MessageTypeConflictError   (also ValueError)   two classes registered under one name
    ├── InvalidOptionError         (also ValueError)   a bad option value (start_from, fsync, ...)
    ├── PartitionLockedError                           held by an exclusive producer of this process
    ├── StorageError               (also OSError)      the disk refused a write  (retriable)
    │   ├── StorageFullError                           ENOSPC, EDQUOT, or a short write
    │   └── StorageIOError                             EIO
    └── ClosedError                                    using a closed producer or consumer

Every message names the offending value. Each class has a ``retriable`` attribute: retry loops
ask it instead of listing types (only a lock held elsewhere and a disk that refused a write are
worth retrying; nothing else here is).
"""

from __future__ import annotations

import errno
import os
from typing import NoReturn


class TwainMQError(Exception):
    """Root of every error raised by twainmq."""

    retriable = False


class InvalidTopicNameError(TwainMQError, ValueError):
    """A topic name outside the safe character set ``[A-Za-z0-9._-]`` (1-200 characters)."""


class TopicExistsError(TwainMQError):
    """``create_topic`` was called for a topic that already exists."""


class UnknownTopicError(TwainMQError, LookupError):
    """The topic does not exist (it has no ``<topic>.twc`` file)."""


class TopicConfigError(TwainMQError):
    """A topic config file that cannot be parsed or holds invalid values."""


class TopicConfigCorruptError(TopicConfigError):
    """A ``.twc`` file whose checksum (or checksum line) does not match its bytes."""


class TopicConfigMismatchError(TopicConfigError):
    """A ``.twc`` file that names another topic, or whose partition count or key type
    disagrees with the data already in the topic's directory (changing them in place would
    re-route keys or misread stored keys: migrate to a new topic instead)."""


class TopicCorruptError(TwainMQError):
    """Damage to acknowledged data: a record that fails its length or CRC check, or a gap in
    a partition's offsets (a missing or short segment).

    ``path`` is the segment file (for a missing segment, the name it would have) and
    ``position`` the byte position of the bad record (-1 for a gap). For a gap, ``partition``
    is the partition and ``offsets`` the ``range`` of offsets that cannot be read; both are
    None for a bad record.
    """

    def __init__(
        self,
        path: object,
        position: int,
        reason: str,
        *,
        partition: int | None = None,
        offsets: range | None = None,
    ) -> None:
        self.path = str(path)
        self.position = position
        self.reason = reason
        self.partition = partition
        self.offsets = offsets
        if offsets is None:
            message = f"{self.path}: corrupt record at byte {position}: {reason}"
        else:
            message = (
                f"{self.path}: partition {partition}, offsets {offsets.start}.."
                f"{offsets.stop - 1}: {reason}"
            )
        super().__init__(message)


class InvalidKeyTypeError(TwainMQError, ValueError):
    """A ``key_type`` that is not ``u8``, ``u16``, ``u32``, ``u64`` or ``charN``."""


class InvalidKeyError(TwainMQError, ValueError):
    """A key that does not fit the topic's key type (type, range or length)."""


class InvalidPartitionError(TwainMQError, ValueError):
    """A partition number outside ``0 .. partitions - 1``."""


class OffsetOutOfRangeError(TwainMQError, ValueError):
    """A seek to an offset below zero or beyond the end of the partition."""


class MessageTooLargeError(TwainMQError, ValueError):
    """An encoded payload larger than the topic's ``max_message_bytes``."""


class InvalidMessageError(TwainMQError, ValueError):
    """A payload of an accepted type whose value cannot be stored: a ``str`` with a lone
    surrogate (not encodable as UTF-8), a dataclass that refers to itself."""


class MessageTypeError(TwainMQError, TypeError):
    """A payload that is not ``str``, ``bytes`` or a dataclass instance."""


class UnregisteredMessageTypeError(MessageTypeError):
    """A dataclass type that is not registered (or not declared by the topic)."""


class MessageTypeConflictError(TwainMQError, ValueError):
    """Two different classes registered under the same message type name."""


class InvalidOptionError(TwainMQError, ValueError):
    """An option with a value it cannot take (``start_from``, ``fsync``, ``timeout`` ...)."""


class PartitionLockedError(TwainMQError):
    """A partition is held by an exclusive producer of this same process (waiting would hang)."""

    retriable = True


class StorageError(TwainMQError, OSError):
    """The disk refused a write: nothing of that write was acknowledged (its call raised,
    the partition's head did not move) and what it left behind was cut off, so the same
    call can be made again once the disk takes writes (see docs/architecture/storage.md,
    "A full disk"). Also an ``OSError``, so ``except OSError`` still catches it.

    ``path`` is the file, ``errno`` the error number (``ENOSPC`` for a short write).
    """

    retriable = True
    hint = "retry once the disk takes writes again"

    def __init__(self, path: object, code: int, action: str, detail: str = "") -> None:
        self.path = str(path)
        name = errno.errorcode.get(code, str(code))
        cause = f"{name}, {os.strerror(code)}" + (f"; {detail}" if detail else "")
        super().__init__(f"{self.path}: {action} failed ({cause}): {self.hint}")
        self.errno = code  # str() stays the message above (OSError's needs strerror too)


class StorageFullError(StorageError):
    """No space left (``ENOSPC``), a quota reached (``EDQUOT``), or a short write (which a
    full disk causes)."""

    hint = "nothing of it was acknowledged; free space and retry"


class StorageIOError(StorageError):
    """The device reported an I/O error (``EIO``)."""

    hint = "nothing of it was acknowledged; retry, and check the device"


_STORAGE_ERRORS: dict[int, type[StorageError]] = {
    errno.ENOSPC: StorageFullError,
    errno.EDQUOT: StorageFullError,
    errno.EIO: StorageIOError,
}


def raise_storage_error(error: OSError, path: object, action: str) -> NoReturn:
    """Raise ``error`` as the StorageError its errno means (ENOSPC, EDQUOT, EIO), or as it
    is (any other errno, or a StorageError already). Call it where ``error`` is handled."""
    kind = None if isinstance(error, StorageError) else _STORAGE_ERRORS.get(error.errno or 0)
    if kind is None:
        raise error
    code = error.errno or 0
    detail = error.strerror if error.strerror and error.strerror != os.strerror(code) else ""
    raise kind(path, code, action, detail) from error


def short_write(path: object, action: str, written: int, size: int) -> StorageFullError:
    """The error of a write that wrote ``written`` of its ``size`` bytes (a full disk)."""
    return StorageFullError(path, errno.ENOSPC, action, f"wrote {written} of {size} bytes")


class ClosedError(TwainMQError):
    """A producer or consumer used after ``close()``."""
