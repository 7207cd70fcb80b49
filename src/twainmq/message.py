"""What producers return and consumers receive."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, NamedTuple


class RecordMetadata(NamedTuple):
    """Where a written message landed: its partition and its offset in that partition."""

    partition: int
    offset: int


class Message(NamedTuple):
    """A message read from a topic (an immutable named tuple).

    ``offset`` and ``partition`` locate it; ``key`` is the producer's key (``int`` for
    u8..u64 topics, ``str`` for charN); ``timestamp_us`` is when it was written, in
    microseconds since the epoch (``timestamp`` gives it as a UTC datetime); ``message`` is
    the payload as sent: ``str``, ``bytes`` or a registered dataclass instance (an
    ``UndecodedMessage`` if it could not be rebuilt when it was read).
    """

    offset: int
    partition: int
    key: Any
    timestamp_us: int
    message: Any

    @property
    def timestamp(self) -> datetime:
        """When the message was written, as a UTC datetime."""
        seconds, micros = divmod(self.timestamp_us, 1_000_000)
        return datetime.fromtimestamp(seconds, tz=timezone.utc).replace(microsecond=micros)

    def __repr__(self) -> str:
        stamp = self.timestamp.isoformat(timespec="microseconds").replace("+00:00", "Z")
        return (
            f"Message(partition={self.partition}, offset={self.offset}, key={self.key!r}, "
            f"timestamp={stamp}, message={self.message!r})"
        )


class UndecodedMessage(NamedTuple):
    """A dataclass message the reader could not rebuild, kept so that reading goes on.

    ``type_name`` is the stored type name, ``json`` its fields as JSON text and ``reason``
    why: usually the type was not registered with the reading ``Twain`` (register it with
    ``Twain.register_msg_cls`` before reading), or the class no longer takes those fields.
    """

    type_name: str
    json: str
    reason: str
