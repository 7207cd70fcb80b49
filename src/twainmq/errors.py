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
    └── ClosedError                                    using a closed producer or consumer

Every message names the offending value. Each class has a ``retriable`` attribute: retry loops
ask it instead of listing types (only a lock or I/O hiccup is worth retrying; none of these is).
"""

from __future__ import annotations


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


class ClosedError(TwainMQError):
    """A producer or consumer used after ``close()``."""
