"""Messages <-> Redis stream entries, as mq-bridge 1.2.0 writes them (pure: no I/O).

An entry is a flat list of field/value pairs (observed with mq-bridge 1.2.0)::

    XADD <stream> [MAXLEN [~] n] *  payload         <the payload bytes>
                                    mqb_message_id  <the id: 32 lower-case hex digits>
                                    <key>           <value>        one pair per metadata
                                    ...                            entry (mqb.src.* dropped)

Reading, the id comes from ``mqb_message_id`` (32 hex digits, a UUID, or a decimal or 0x
integer, as `mq_bridge.endpoints.kit.wire` reads ids); an entry without one (written by
another client) gets a stable id from its stream and entry id (`position_id`), so a
redelivered entry keeps its id. An entry without ``payload`` has an empty payload and keeps
all its fields as metadata. Metadata named ``payload`` or ``mqb_message_id`` cannot be
written (the fields are taken) and is left out; inbound ``mqb.src.*`` fields are dropped.

Both directions are the hot path of the endpoint, so both work on RESP directly:

- `XaddEncoder` writes each XADD as finished RESP bytes with one ``%`` format per message:
  everything but the payload and the id (command, stream, trim, field names, metadata) is
  a template made once per distinct metadata (kept while messages carry equal metadata).
- `decode_entries` reads the entries as hiredis parses them (``[id, [field, value, ...]]``)
  in one pass: an entry laid out as we and mq-bridge write it (payload, id, metadata)
  costs two comparisons, a slice, ``int(id, 16)`` and `Message.trusted`; metadata is
  decoded only when it differs from the previous entry's, and messages with equal
  metadata share one dict. Anything else takes the general path (`decode_entry`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from mq_bridge.endpoints.kit.source_metadata import SOURCE_PREFIX
from mq_bridge.endpoints.kit.wire import MESSAGE_ID_HEADER, message_from_wire, position_id
from mq_bridge.message import NO_METADATA, Message, fields_of

__all__ = ["ID_FIELD", "PAYLOAD_FIELD", "XaddEncoder", "decode_entries", "decode_entry"]

PAYLOAD_FIELD = b"payload"
ID_FIELD = b"mqb_message_id"
_RESERVED = frozenset({"payload", "mqb_message_id"})
_SOURCE_PREFIX_BYTES = SOURCE_PREFIX.encode()
#: An entry as hiredis parses it: ``[entry id, [field, value, field, value, ...]]``.
Entry = Sequence[Any]
_trusted = Message.trusted
#: The part of an XADD template that takes the payload's length, the payload and the id.
_FORMAT = b"%d\r\n%b\r\n$14\r\nmqb_message_id\r\n$32\r\n%032x\r\n"


def _bulk(value: str | bytes | int) -> bytes:
    data = value if isinstance(value, bytes) else str(value).encode()
    return b"$%d\r\n%b\r\n" % (len(data), data)


class XaddEncoder:
    """XADD commands for one stream, as RESP bytes ready to send (see the module docstring).

    ``*<argc>`` XADD <stream> [MAXLEN [~] n] * payload <payload> mqb_message_id <32 hex>
    <key> <value> ...: the template holds all of it but ``<payload>`` and the id, with
    ``%`` doubled in what it quotes, so ``template % (len(payload), payload, id)`` is the
    command. Safe to share between threads (the cached template is swapped as one value).
    """

    def __init__(self, stream: str, trim: Sequence[str | int] = ()) -> None:
        arguments = ["XADD", stream, *trim, "*", PAYLOAD_FIELD]
        self._head = b"".join(map(_bulk, arguments))
        self._argc = len(arguments) + 3  # + the payload, the id field and its value
        # The last metadata seen and its template, as one tuple: outputs may be shared.
        self._last: tuple[Mapping[str, str], bytes] = (NO_METADATA, self.template(NO_METADATA))

    def template(self, metadata: Mapping[str, str]) -> bytes:
        """The format of an XADD carrying `metadata` (reserved and mqb.src.* keys left out)."""
        pairs = b""
        count = self._argc
        for key, value in metadata.items():
            if key in _RESERVED or key.startswith(SOURCE_PREFIX):
                continue
            name, text = key.encode(), value.encode()
            pairs += b"$%d\r\n%b\r\n$%d\r\n%b\r\n" % (len(name), name, len(text), text)
            count += 2
        head = b"*%d\r\n%b$" % (count, self._head)
        return head.replace(b"%", b"%%") + _FORMAT + pairs.replace(b"%", b"%%")

    def encode(self, messages: Sequence[Message]) -> bytes:
        """The XADDs of `messages`, one after another (assigns ids to messages without)."""
        parts: list[bytes] = []
        append = parts.append
        last, template = self._last
        for message in messages:
            # One C-level read of the three fields (three properties were a third of the
            # encoding): `fields_of` is message.py's door for exactly this.
            metadata, payload, id_value = fields_of(message)
            if metadata is not last and metadata != last:
                last, template = metadata, self.template(metadata)
            if id_value is None:  # a new message: it gets its id as it travels
                id_value = message.id_int
            append(template % (len(payload), payload, id_value))
        self._last = (last, template)
        return b"".join(parts)

    def chunks(self, messages: Sequence[Message], size: int) -> Iterator[bytes]:
        """`encode` `size` messages at a time: Redis runs the first XADDs while the next
        are encoded (a small batch is one chunk)."""
        for start in range(0, len(messages), size):
            yield self.encode(messages[start : start + size])

    def encode_one(self, payload: bytes, metadata: Mapping[str, str], id_value: int) -> bytes:
        """One XADD (`send_json`: no `Message` needed)."""
        last, template = self._last
        if metadata is not last and metadata != last:
            template = self.template(metadata)
            self._last = (metadata, template)
        return template % (len(payload), payload, id_value)


def decode_entries(entries: Sequence[Entry], stream: str, source: bool) -> list[Message]:
    """The messages of `entries` (see the module docstring), one per entry, in order.

    With `source`, each gets ``mqb.src.redis_stream``, ``mqb.src.redis_entry_id`` and
    mq-bridge 1.2.0's ``mqb.src.redis_stream_id`` (the entry id): the general path.
    """
    if source:
        return [decode_entry(entry_id, fields, stream, True) for entry_id, fields in entries]
    messages: list[Message] = []
    append = messages.append
    trusted = _trusted
    last_tail: list[bytes] = []
    shared: dict[str, str] = NO_METADATA
    for entry_id, fields in entries:
        if len(fields) >= 4 and fields[0] == PAYLOAD_FIELD and fields[2] == ID_FIELD:
            raw_id = fields[3]
            tail = fields[4:]
            if tail != last_tail:
                last_tail, shared = tail, _metadata(tail)
            if len(raw_id) == 32:
                try:
                    append(trusted(fields[1], shared, int(raw_id, 16)))
                    continue
                except ValueError:
                    pass
        append(decode_entry(entry_id, fields, stream, False))
    return messages


#: Field name -> metadata key (None: not metadata), for the names seen lately.
_NAMES: dict[bytes, str | None] = {}
_NAMES_KEPT = 1024


def _name(field: bytes) -> str | None:
    name = _NAMES.get(field, "")
    if name != "":
        return name
    try:
        text: str | None = field.decode()
    except UnicodeDecodeError:
        text = None  # metadata is text: a binary field written by another client
    if text is not None and (text in _RESERVED or text.startswith(SOURCE_PREFIX)):
        text = None
    if len(_NAMES) >= _NAMES_KEPT:
        _NAMES.clear()
    _NAMES[field] = text
    return text


def _metadata(pairs: Sequence[bytes]) -> dict[str, str]:
    """The metadata of flat field/value `pairs` (a new dict; `NO_METADATA` when empty)."""
    metadata: dict[str, str] = {}
    for index in range(0, len(pairs) - 1, 2):
        key = _name(pairs[index])
        if key is None:
            continue
        try:
            metadata[key] = pairs[index + 1].decode()
        except UnicodeDecodeError:
            continue
    return metadata or NO_METADATA


def decode_entry(entry_id: bytes, fields: Sequence[bytes], stream: str, source: bool) -> Message:
    """One entry as a message, whatever its layout (see the module docstring)."""
    payload = b""
    raw_id: bytes | None = None
    rest: list[bytes] = []
    for index in range(0, len(fields) - 1, 2):
        key, value = fields[index], fields[index + 1]
        if key == PAYLOAD_FIELD:
            payload = value
        elif key == ID_FIELD:
            raw_id = value
        else:
            rest += (key, value)
    metadata = _metadata(rest)
    if source:
        entry = entry_id.decode()
        metadata = {
            **metadata,
            "mqb.src.redis_stream": stream,
            "mqb.src.redis_entry_id": entry,
            "mqb.src.redis_stream_id": entry,
        }
    if raw_id is not None and len(raw_id) == 32:
        try:
            return _trusted(payload, metadata, int(raw_id, 16))
        except ValueError:
            pass
    return _slow_path(payload, metadata, raw_id, stream, entry_id)


def _slow_path(
    payload: bytes, metadata: dict[str, str], raw: bytes | None, stream: str, entry_id: bytes
) -> Message:
    """Other id spellings (a UUID, an integer) and no id at all, by the kit's rules."""
    fallback = position_id("redis_streams", stream, entry_id.decode())
    headers: dict[str, Any] = dict(metadata)
    if raw is not None:
        headers[MESSAGE_ID_HEADER] = raw
    message = message_from_wire(payload, headers, fallback_id=fallback)
    if not metadata:  # message_from_wire dropped our mqb.src.* fields: none were added
        return message
    return _trusted(message.payload, metadata, message.id_int)
