"""Wire conventions shared by the brokers whose messages carry headers.

A `Message` goes out as its payload plus headers, and comes back as the same message:

    headers = metadata without mqb.src.*  +  {"mq_bridge.message_id": "<canonical UUID>"}

On the way in, header values arrive as ``str`` or ``bytes`` (decoded as UTF-8; a value
that is not UTF-8 is skipped). The id comes from, in order:

1. the ``mq_bridge.message_id`` header, when it holds a UUID or a 128-bit integer;
2. `fallback_id`: an id derived from the source position (`position_id`), so a message
   redelivered from the same position (Kafka partition and offset, JetStream sequence)
   gets the same id and downstream deduplication works;
3. a new id.

The id header and any ``mqb.src.*`` header are not kept in the metadata: a peer could
forge the latter (see `mq_bridge.endpoints.kit.source_metadata`).
"""

from __future__ import annotations

import logging
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat

import orjson

from mq_bridge.endpoints.kit.source_metadata import SOURCE_PREFIX, drop_source_keys
from mq_bridge.message import NO_METADATA, Message, new_message_id

__all__ = [
    "MESSAGE_ID_HEADER",
    "POSITION_NAMESPACE",
    "headers_for",
    "json_uuid",
    "json_uuids",
    "message_from_wire",
    "position_id",
]

log = logging.getLogger("mq_bridge.endpoints.wire")

_new_object = object.__new__
_set_slot = object.__setattr__
_UUID = uuid.UUID


def _uuid_of(value: int) -> uuid.UUID:
    """A `uuid.UUID` of the 128-bit `value`, made without `UUID.__init__` (which parses its
    arguments in Python): its ``int`` slot is all that str(), ==, hash() and orjson read."""
    made = _new_object(_UUID)
    _set_slot(made, "int", value)
    return made


def _uuid_text(value: int) -> str:
    digits = value.to_bytes(16, "big").hex()
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def _pick_json_uuid() -> Callable[[int], object]:
    probe = 0x0123456789ABCDEF0123456789ABCDEF
    try:
        if orjson.dumps(_uuid_of(probe)) == b'"' + _uuid_text(probe).encode() + b'"':
            return _uuid_of
    except (TypeError, AttributeError):  # a Python whose UUID keeps its value elsewhere
        pass
    return _uuid_text


#: ``json_uuid(id_int)``: a value that ``orjson.dumps`` writes as the canonical UUID text
#: of the id, for the JSON envelopes' ``message_id``. A `uuid.UUID` made straight from its
#: slot, which orjson formats in C (~0.4 us a message, against ~1.1 us for the text made
#: in Python), or that text itself where this Python's UUID does not allow it.
json_uuid: Callable[[int], object] = _pick_json_uuid()


def json_uuids(ids: Sequence[int]) -> list[object]:
    """`json_uuid` of each of `ids`. Where it makes `uuid.UUID`s from their ``int`` slot,
    they are made here the same way by C-level builtins (a third of the cost of a call per
    id), for codecs that write a whole batch's ids at once."""
    if json_uuid is not _uuid_of:
        return list(map(json_uuid, ids))
    made: list[object] = list(map(_new_object, repeat(_UUID, len(ids))))
    deque(map(_set_slot, made, repeat("int"), ids), maxlen=0)
    return made


MESSAGE_ID_HEADER = "mq_bridge.message_id"
#: Ids made from source positions (`position_id`; sqlx derives its row ids from it). Never
#: change it: ids must stay stable across versions.
POSITION_NAMESPACE = uuid.UUID("c51c8622-b76b-4320-b6f0-499679493945")


def headers_for(message: Message) -> dict[str, str]:
    """The headers that carry `message`: its metadata minus ``mqb.src.*``, plus its id.

    The id is written as mq-bridge writes it, 32 hex digits without dashes: mq-bridge reads
    only that form (a dashed UUID it would replace by a position id); we read both.
    """
    headers = drop_source_keys(message.metadata)  # .metadata is a fresh copy: ours to change
    headers[MESSAGE_ID_HEADER] = f"{message.id_int:032x}"
    return headers


def message_from_wire(
    payload: bytes,
    headers: Mapping[str, str | bytes] | None,
    fallback_id: int | None = None,
) -> Message:
    """The `Message` that `payload` and `headers` carry (see the module docstring)."""
    metadata: dict[str, str] = {}
    id_text: str | None = None
    for key, value in (headers or NO_METADATA).items():
        if not isinstance(value, str):
            try:
                value = str(value, "utf-8")
            except UnicodeDecodeError:
                log.debug("skipped header %r: its value is not UTF-8", key)
                continue
        if key == MESSAGE_ID_HEADER:
            id_text = value
        elif not key.startswith(SOURCE_PREFIX):
            metadata[key] = value
    id_value = _parse_id(id_text) if id_text is not None else None
    if id_value is None:
        id_value = new_message_id() if fallback_id is None else fallback_id
    if type(payload) is not bytes:
        payload = bytes(payload)
    return Message.trusted(payload, metadata or NO_METADATA, id_value)


def position_id(*parts: str | int) -> int:
    """A stable 128-bit id for a source position, e.g. ``("kafka", topic, partition, offset)``.

    Equal parts always give the same id (a UUIDv5 in our own namespace); different parts,
    a different one. Start with the endpoint's name, so brokers never share ids.
    """
    # Length-prefixed, so ("a.b", "c") and ("a", "b.c") differ.
    name = "".join(f"{len(text)}:{text};" for text in map(str, parts))
    return uuid.uuid5(POSITION_NAMESPACE, name).int


def _parse_id(text: str) -> int | None:
    """The 128-bit id in a header: a UUID, or a decimal or ``0x`` integer; else None."""
    text = text.strip()
    try:
        return uuid.UUID(text).int
    except ValueError:
        pass
    try:
        number = int(text, 16) if text[:2].lower() == "0x" else int(text, 10)
    except ValueError:
        number = -1
    if 0 <= number < 1 << 128:
        return number
    log.debug("ignored the %s header %r: not a UUID or 128-bit integer", MESSAGE_ID_HEADER, text)
    return None
