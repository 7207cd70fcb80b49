"""The one `Message` type that travels through every layer of the bridge.

A message is a payload (bytes), string metadata and an id. Broker-native objects stop at
the endpoint that received them; everything after it sees only `Message`.

Ids are UUID strings. A message made by the caller without one has none (`.id` is None,
as in mq-bridge) until it travels: the first endpoint that needs it (a publisher, an
output's codec) gives it a UUIDv7 (time-ordered, generated cheaply, rendered to text only
when `.id` is read), which the message then keeps. Messages from an input always have one.
An id given by the caller may be a UUID string, a ``0x`` hex literal or a decimal integer
(all taken as the 128-bit value); any other string is hashed to a stable UUID (UUIDv5 in
our own namespace), so equal strings always give the same id.

JSON goes through orjson when it is installed (a dependency; several times faster than the
standard library on the hot paths) and the standard library otherwise. One difference from
the standard library, shared with mq-bridge: `json()` decodes integers beyond 64 bits as
floats (serializing keeps them exact).

Messages are treated as immutable: `with_json`, `with_payload` and `with_metadata` return
new messages that keep the id (and the metadata, unless replaced).
"""

from __future__ import annotations

import json as _json
import operator
import random
import time
import uuid
from collections.abc import Callable, Mapping
from itertools import repeat
from typing import Any

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a dependency; this keeps odd platforms going
    _orjson = None  # type: ignore[assignment]

__all__ = [
    "NO_METADATA",
    "Message",
    "coerce_metadata",
    "dump_json",
    "dump_json_transient",
    "fields_of",
    "json_send_parts",
    "messages_from_envelopes",
    "messages_with_new_ids",
    "new_message_id",
    "new_message_ids",
    "normalize_message_id",
    "uuid7_generator",
    "uuid7_generators",
]

_ID_NAMESPACE = uuid.UUID("6f1d7c52-3b8e-4e0a-9d7a-2f4b8c1e5a90")
_VERSION_AND_VARIANT = (0x7 << 76) | (0b10 << 62)


def uuid7_generator(clock_ns: Callable[[], int] = time.time_ns) -> Callable[[], int]:
    """A function making UUIDv7s as 128-bit integers: 48 bits of Unix milliseconds from
    `clock_ns`, the version, and 74 random bits.

    Within one millisecond the 12-bit ``rand_a`` field counts up from a random start
    (RFC 9562, method 1); when it would overflow, or the clock steps back, the timestamp
    moves one millisecond ahead instead, so the ids one generator makes always sort in
    creation order.
    """
    return uuid7_generators(clock_ns)[0]


def uuid7_generators(
    clock_ns: Callable[[], int] = time.time_ns,
) -> tuple[Callable[[], int], Callable[[int], list[int]]]:
    """`uuid7_generator`'s function, and one making `count` ids at once from the same
    state, in creation order too: the clock is read once, and the ids that fit in that
    millisecond's sequence are made by C-level builtins (~40% fewer instructions an id
    than a call each). State lives in closure cells: cheaper to reach than globals."""
    getrandbits = random.Random(random.SystemRandom().getrandbits(64)).getrandbits
    last_ms = sequence = prefix = 0  # prefix: everything but rand_b
    step = 1 << 64  # one more in rand_a

    def new_id() -> int:
        nonlocal last_ms, sequence, prefix
        now_ms = clock_ns() // 1_000_000
        if now_ms > last_ms:
            last_ms = now_ms
            sequence = getrandbits(10)
            prefix = (now_ms << 80) | _VERSION_AND_VARIANT | (sequence << 64)
        elif sequence < 0xFFF:
            sequence += 1
            prefix += step
        else:
            last_ms += 1
            sequence = 0
            prefix = (last_ms << 80) | _VERSION_AND_VARIANT
        return prefix | getrandbits(62)

    def new_ids(count: int) -> list[int]:
        nonlocal sequence, prefix
        if count < 1:
            return []
        ids = [new_id()]  # reads the clock; `prefix` now holds this id's rand_a
        room = min(count - 1, 0xFFF - sequence)  # the rest of this millisecond's sequence
        prefixes = range(prefix + step, prefix + (room + 1) * step, step)
        ids += map(operator.or_, prefixes, map(getrandbits, repeat(62, room)))
        sequence += room
        prefix += room * step
        ids += [new_id() for _ in range(count - 1 - room)]  # the millisecond ran out
        return ids

    return new_id, new_ids


#: The process's id generator: `new_message_id()` is a new UUIDv7 as a 128-bit integer;
#: `new_message_ids(count)` is a list of `count` of them.
new_message_id, new_message_ids = uuid7_generators()


def normalize_message_id(value: str | int | uuid.UUID) -> int:
    """Turn a caller-given id into the 128-bit value we store."""
    if isinstance(value, uuid.UUID):
        return value.int
    if isinstance(value, int) and not isinstance(value, bool):
        if 0 <= value < 1 << 128:
            return value
        raise ValueError(f"message id {value} does not fit in 128 bits")
    if not isinstance(value, str):
        raise TypeError(f"message id must be a str, int or UUID, not {type(value).__name__}")
    text = value.strip()
    try:
        return uuid.UUID(text).int
    except ValueError:
        pass
    parsed = _parse_integer_id(text)
    if parsed is not None:
        return parsed
    return uuid.uuid5(_ID_NAMESPACE, value).int


def _parse_integer_id(text: str) -> int | None:
    try:
        number = int(text, 16) if text[:2].lower() == "0x" else int(text, 10)
    except ValueError:
        return None
    return number if 0 <= number < 1 << 128 else None


def _format_id(value: int) -> str:
    return str(uuid.UUID(int=value))


#: The metadata of every message created without any. Shared: a message's metadata dict
#: is never changed in place (messages are immutable; `with_metadata` makes a new dict),
#: so messages may share one, which saves a dict per message on the hot paths.
NO_METADATA: dict[str, str] = {}


class Message:
    """A payload with string metadata and a UUID id.

    >>> m = Message(b'{"n": 1}', {"kind": "order.created"})
    >>> m.json()
    {'n': 1}
    >>> m.with_json({"n": 2}).metadata
    {'kind': 'order.created'}
    """

    __slots__ = ("_id", "_metadata", "_payload")

    def __init__(
        self,
        payload: bytes | bytearray | memoryview,
        metadata: Mapping[str, str] | None = None,
        id: str | int | uuid.UUID | None = None,
    ) -> None:
        if type(payload) is not bytes:
            payload = _coerce_payload(payload)
        self._payload: bytes = payload
        self._metadata: dict[str, str] = coerce_metadata(metadata) if metadata else NO_METADATA
        self._id: int | None = None if id is None else normalize_message_id(id)

    @classmethod
    def from_json(
        cls,
        data: Any,
        metadata: Mapping[str, str] | None = None,
        id: str | int | uuid.UUID | None = None,
    ) -> Message:
        """A message whose payload is `data` serialized as compact JSON."""
        return cls(dump_json(data), metadata, id)

    @classmethod
    def trusted(cls, payload: bytes, metadata: dict[str, str], id_value: int | None) -> Message:
        """A message built without checks or copies: the door for endpoints and codecs.

        For data the library already holds in the right types: `payload` is ``bytes``,
        `metadata` a ``dict`` of ``str`` to ``str`` that nobody changes afterwards (it is
        shared, not copied; `NO_METADATA` for none), `id_value` the 128-bit id (None: not
        yet assigned). Anything
        else makes a broken message: use the constructor for values from users.
        """
        message = object.__new__(cls)
        message._payload = payload
        message._metadata = metadata
        message._id = id_value
        return message

    @property
    def payload(self) -> bytes:
        return self._payload

    @property
    def metadata(self) -> dict[str, str]:
        """A copy of the metadata: changing it does not change the message."""
        return dict(self._metadata)

    @property
    def id(self) -> str | None:
        """The id as UUID text; None for a new message that has not travelled yet."""
        return None if self._id is None else _format_id(self._id)

    def assigned_id(self) -> str:
        """The id as UUID text, given to the message first if it has none (see `id_int`)."""
        return _format_id(self.id_int)

    @property
    def metadata_view(self) -> dict[str, str]:
        """The metadata itself, without a copy: never change it (for hot paths and codecs)."""
        return self._metadata

    @property
    def id_int(self) -> int:
        """The id as its 128-bit integer value, assigned now if the message has none yet.

        Endpoints read this when a message travels, so every sent message has an id (and
        keeps it: sending it again sends the same id).
        """
        value = self._id
        if value is None:
            value = self._id = new_message_id()
        return value

    def get(self, key: str, default: str | None = None) -> str | None:
        """One metadata value without copying the whole mapping."""
        return self._metadata.get(key, default)

    def json(self) -> Any:
        """The payload decoded as JSON; `ValueError` says why when it is not JSON."""
        try:
            return _loads(self._payload)
        except UnicodeDecodeError as error:
            raise ValueError(f"message payload is not UTF-8 text: {error}") from None
        except _json.JSONDecodeError as error:
            raise ValueError(f"message payload is not valid JSON: {error}") from None

    def text(self) -> str:
        """The payload decoded as UTF-8; `ValueError` names the bad byte position."""
        try:
            return self._payload.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"message payload is not UTF-8 text: {error}") from None

    def with_json(self, data: Any) -> Message:
        """A new message with `data` as its JSON payload, keeping metadata and id."""
        return Message.trusted(dump_json(data), self._metadata, self._id)

    def with_payload(self, payload: bytes | bytearray | memoryview) -> Message:
        """A new message with `payload`, keeping metadata and id."""
        if type(payload) is not bytes:
            payload = _coerce_payload(payload)
        return Message.trusted(payload, self._metadata, self._id)

    def with_metadata(self, updates: Mapping[str, str] | None = None, **more: str) -> Message:
        """A new message whose metadata is this one's updated with `updates`."""
        metadata = self._metadata.copy()
        if updates:
            metadata.update(coerce_metadata(updates))
        if more:
            metadata.update(coerce_metadata(more))
        return Message.trusted(self._payload, metadata, self._id)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return (
            self._id == other._id
            and self._payload == other._payload
            and self._metadata == other._metadata
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        # mq-bridge's shape; the payload itself is never shown (it may hold anything).
        metadata = _json.dumps(self._metadata, ensure_ascii=False)
        return f"Message(id={self.id!r}, metadata={metadata}, payload_len={len(self._payload)})"


#: The trusted reader door for codecs' hot loops:
#: ``metadata, payload, id_or_none = fields_of(message)`` in one C-level call, no copies.
#: The id is None for a message that has not travelled yet: read ``message.id_int`` then,
#: which assigns it. Never change the metadata it returns (it is the message's own).
fields_of = operator.attrgetter("_metadata", "_payload", "_id")


def messages_from_envelopes(
    envelopes: list[Any], reserved_prefix: str | None = None
) -> list[Message]:
    """Messages from decoded JSON envelopes, mq-bridge's canonical text form of a message:
    ``{"message_id": "<uuid>", "payload": "<text>", "metadata": {...}}``.

    The trusted door for codecs that carry this envelope (the `file` endpoint's `normal`
    and `text` formats): it takes only the common case — text payload, UUID id, string
    metadata — and raises (`KeyError`, `ValueError`, `TypeError`, `AttributeError`) on
    anything else, so the caller falls back to its general path for the whole batch. A
    metadata key starting with `reserved_prefix` (if given) counts as anything else.

    It is the read path's hot spot, hence no per-message calls: messages are built in
    place, and an envelope whose metadata equals the previous one's shares that dict
    (messages never change their metadata; a shared dict is already checked, and one dict
    instead of one per message leaves the garbage collector less to track).
    """
    messages: list[Message] = []
    append = messages.append
    new = object.__new__
    shared: dict[str, str] = NO_METADATA
    for envelope in envelopes:
        digits = envelope["message_id"].replace("-", "")
        if len(digits) != 32:
            raise ValueError("not a UUID")
        metadata = envelope.get("metadata")
        if not metadata:
            metadata = NO_METADATA
        elif metadata == shared:
            metadata = shared
        else:
            for value in metadata.values():
                if type(value) is not str:
                    raise TypeError("`metadata` must be an object of strings")
            if reserved_prefix and any(key.startswith(reserved_prefix) for key in metadata):
                raise ValueError(f"a metadata key starts with {reserved_prefix!r}")
            shared = metadata
        message = new(Message)
        message._payload = envelope["payload"].encode()
        message._metadata = metadata
        message._id = int(digits, 16)
        append(message)
    return messages


def messages_with_new_ids(payloads: list[bytes], metadata: dict[str, str]) -> list[Message]:
    """A message of each of `payloads`, all with `metadata` and each with a new id.

    The trusted door for codecs whose wire carries no id (ZeroMQ's `raw` and `raw_framed`
    frames), under `Message.trusted`'s terms: ``bytes`` payloads, and a metadata dict that
    nobody changes (it is shared by all the messages). No call per message: the ids come
    from `new_message_ids`.
    """
    messages: list[Message] = []
    append = messages.append
    new = object.__new__
    for payload, id_value in zip(payloads, new_message_ids(len(payloads))):
        message = new(Message)
        message._payload = payload
        message._metadata = metadata
        message._id = id_value
        append(message)
    return messages


def _dump_json_stdlib(data: Any) -> bytes:
    try:
        return _json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
    except (TypeError, ValueError) as error:
        raise ValueError(f"value is not JSON-serializable: {error}") from None


if _orjson is not None:
    _loads = _orjson.loads
    _orjson_dumps = _orjson.dumps
    _NON_STR_KEYS = _orjson.OPT_NON_STR_KEYS

    def dump_json(data: Any) -> bytes:
        try:
            # Copied into an exact-size object: orjson's own result is a shrunk 1 KiB
            # buffer, and keeping many of those alive (queued messages) made each call
            # ~6x slower in glibc's allocator than this copy costs.
            return bytes(memoryview(_orjson_dumps(data, option=_NON_STR_KEYS)))
        except TypeError:  # e.g. integers beyond 64 bits: the standard library handles them
            return _dump_json_stdlib(data)

    def dump_json_transient(data: Any) -> bytes:
        """`dump_json` for a payload encoded into a record at once and then dropped: orjson's
        buffer is not copied, since it is not kept (see `dump_json`). Same bytes, same errors."""
        try:
            return _orjson_dumps(data, option=_NON_STR_KEYS)
        except TypeError:
            return _dump_json_stdlib(data)

else:  # pragma: no cover
    _loads = _json.loads
    dump_json = dump_json_transient = _dump_json_stdlib


def json_send_parts(
    data: Any,
    metadata: Mapping[str, str] | None,
    id: str | int | uuid.UUID | None,
    dump: Callable[[Any], bytes] = dump_json,
) -> tuple[bytes, dict[str, str], int]:
    """The payload, checked metadata and id of `Message.from_json(data, metadata, id)` about
    to be sent: the prologue of every endpoint's `json_sender` (`Publisher.send_json` writes
    the same three lines out, for the cost of a call on its in-process path).

    The checks run in `Message`'s order (payload, metadata, id), so a bad value fails here
    exactly as ``send_one(Message.from_json(data, metadata, id))`` would; the id is the one
    given, or a new one (the message travels now). `dump` is `dump_json_transient` for a
    caller that encodes the payload into a record at once.
    """
    payload = dump(data)
    checked = coerce_metadata(metadata) if metadata else NO_METADATA
    return payload, checked, new_message_id() if id is None else normalize_message_id(id)


def _coerce_payload(payload: object) -> bytes:
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return bytes(payload)
    raise TypeError(
        f"message payload must be bytes, not {type(payload).__name__}"
        " (use Message.from_json for JSON values, or encode text first)"
    )


def coerce_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    result = dict(metadata)
    for key, value in result.items():
        if type(key) is not str or type(value) is not str:
            raise TypeError(
                f"message metadata must map str to str; got {key!r}: {type(value).__name__}"
            )
    return result
