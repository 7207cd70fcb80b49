"""Line formats of the `file` endpoint: pure encode/decode, no I/O.

A file is a sequence of records, each followed by the delimiter (default ``\\n``)::

    +---------------------------+---+---------------------------+---+
    | record 0                  | D | record 1                  | D | ...
    +---------------------------+---+---------------------------+---+

The envelope formats write one JSON object per record (keys as mq-bridge writes them, so
files are readable by either)::

    {"message_id":"<uuid>","payload":"<UTF-8 text>","metadata":{"k":"v"}}   normal, text
    {"message_id":"<uuid>","payload_base64":"<base64>","metadata":{...}}    payload not UTF-8
    {"message_id":"<uuid>","payload":<JSON value>,"metadata":{...}}         json

``metadata`` is left out when empty. `normal` and `text` are byte-exact for every payload;
`json` is byte-exact for compact JSON (what ``send_json`` writes) and keeps the meaning of
any other JSON (whitespace may change); a payload that is not JSON goes to
``payload_base64``. Reading `normal`/`text` also accepts a ``payload`` that is a list of
byte values (mq-bridge-py 0.3.2 files) or any other JSON value (a `json` file).

`raw` writes the payload bytes alone. Its records carry no id, so a record's id is derived
from where it lies: ``id_base | byte offset`` (stable across restarts, for deduplication).

A record that contains the delimiter cannot be framed: encoding reports it as that
message's failure instead of writing a line that would read back as two.
"""

from __future__ import annotations

import binascii
import functools
import gc
import json
from collections.abc import Callable, Sequence
from typing import Any

from mq_bridge.endpoints.kit.wire import json_uuid
from mq_bridge.message import (
    NO_METADATA,
    Message,
    fields_of,
    messages_from_envelopes,
    normalize_message_id,
)

_fast_loads: Callable[[bytes], Any]
_fast_dumps: Callable[[Any], bytes]
try:
    import orjson  # a dependency; the stdlib fallback keeps odd platforms going

    _fast_loads, _fast_dumps = orjson.loads, orjson.dumps
except ImportError:  # pragma: no cover
    orjson = None  # type: ignore[assignment]
    _fast_loads = json.loads

    def _fast_dumps(value: Any) -> bytes:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


__all__ = [
    "FORMATS",
    "DecodeResult",
    "batch_encoder",
    "decode_records",
    "encode_record",
    "encode_records",
    "format_name",
    "text_envelope",
]

#: Config names, with mq-bridge's aliases, mapped to the format they mean.
FORMATS: dict[str, str] = {
    "normal": "normal",
    "json": "json",
    "text": "text",
    "raw": "raw",
    "envelope": "normal",
    "envelope_json": "json",
    "envelope_text": "text",
    "payload": "raw",
}

_trusted = Message.trusted


def format_name(name: str) -> str:
    """The canonical format for a config name (aliases resolved); KeyError when unknown."""
    return FORMATS[name]


# --- encoding ----------------------------------------------------------------------------


def encode_records(
    messages: Sequence[Message], fmt: str, delimiter: bytes
) -> tuple[bytes, dict[int, Exception]]:
    """The bytes to append for `messages`, and the messages that cannot be written, by index."""
    fast = batch_encoder(fmt, delimiter)
    if fast is not None:
        return fast(messages), {}
    records: list[bytes] = []
    failures: dict[int, Exception] = {}
    for index, message in enumerate(messages):
        try:
            records.append(encode_record(message, fmt, delimiter))
        except ValueError as error:
            failures[index] = error
    return b"".join(records), failures


def encode_record(message: Message, fmt: str, delimiter: bytes) -> bytes:
    """One message's record followed by the delimiter; ValueError when it cannot be framed."""
    record = message.payload if fmt == "raw" else _ENVELOPE_ENCODERS[fmt](message)
    if delimiter in record:
        raise ValueError(
            f"message {message.id}: its {fmt} record contains the delimiter {delimiter!r}"
        )
    return record + delimiter


@functools.lru_cache(maxsize=64)
def batch_encoder(fmt: str, delimiter: bytes) -> Callable[[Sequence[Message]], bytes] | None:
    """A fast encoder for whole batches that never fails, or None for this format/delimiter.

    Only `normal`/`text` with a one-byte control delimiter qualify: JSON text never holds a
    raw control byte, and a payload that is not UTF-8 goes to ``payload_base64``, so no
    message can fail and encoding can even wait until the buffer is written.
    """
    if fmt in ("normal", "text") and len(delimiter) == 1 and delimiter < b" " and orjson:
        return functools.partial(_encode_text_envelopes, delimiter=delimiter)
    return None


def _encode_text_envelopes(messages: Sequence[Message], delimiter: bytes) -> bytes:
    """All envelopes in one `orjson.dumps` of a list, its top-level commas made delimiters.

    ``},{"message_id":`` occurs in that JSON only between two envelopes: inside a string
    every quote is escaped, and metadata values are strings. The delimiter count is still
    checked before the result is trusted.
    """
    if not messages:
        return b""
    envelopes: list[dict[str, Any]] = []
    append = envelopes.append
    for message in messages:
        metadata, payload, id_value = fields_of(message)  # one C-level read of the three
        if id_value is None:  # a new message: it gets its id as it travels
            id_value = message.id_int
        message_id = json_uuid(id_value)
        try:
            envelope = {"message_id": message_id, "payload": payload.decode()}
        except UnicodeDecodeError:
            envelope = {"message_id": message_id, "payload_base64": _base64(payload)}
        if metadata:
            envelope["metadata"] = metadata
        append(envelope)
    try:
        listed: bytes = orjson.dumps(envelopes)
    except TypeError:  # e.g. a lone surrogate in metadata
        return _encode_one_by_one(messages, delimiter)
    data = listed[1:-1].replace(b'},{"message_id":', b"}" + delimiter + b'{"message_id":')
    data += delimiter
    if data.count(delimiter) != len(messages):  # pragma: no cover - see the docstring
        return _encode_one_by_one(messages, delimiter)
    return data


def _encode_one_by_one(messages: Sequence[Message], delimiter: bytes) -> bytes:
    return b"".join([encode_record(message, "normal", delimiter) for message in messages])


def _uuid_text(value: int) -> str:
    digits = value.to_bytes(16, "big").hex()  # a little faster than f"{value:032x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def _base64(payload: bytes) -> str:
    return binascii.b2a_base64(payload, newline=False).decode("ascii")


def _dump(envelope: dict[str, Any]) -> bytes:
    try:
        return _fast_dumps(envelope)
    except (TypeError, ValueError):  # e.g. a lone surrogate in metadata: escape it instead
        return json.dumps(envelope, separators=(",", ":")).encode()


def _text_envelope(message: Message) -> bytes:
    return text_envelope(message.payload, message.metadata_view, message.id_int)


def text_envelope(payload: bytes, metadata: dict[str, str], id_value: int) -> bytes:
    """The `normal`/`text` envelope (no delimiter) of a message given by its parts.

    Single sends encode here one at a time, hence the inlined id text and dumps.
    """
    hex_id = id_value.to_bytes(16, "big").hex()
    uuid_text = f"{hex_id[:8]}-{hex_id[8:12]}-{hex_id[12:16]}-{hex_id[16:20]}-{hex_id[20:]}"
    envelope: dict[str, Any]
    try:
        envelope = {"message_id": uuid_text, "payload": payload.decode()}
    except UnicodeDecodeError:
        envelope = {"message_id": uuid_text, "payload_base64": _base64(payload)}
    if metadata:
        envelope["metadata"] = metadata
    try:
        return _fast_dumps(envelope)
    except (TypeError, ValueError):  # e.g. a lone surrogate in metadata
        return _dump(envelope)


def _json_envelope(message: Message) -> bytes:
    envelope: dict[str, Any] = {"message_id": _uuid_text(message.id_int)}
    try:
        envelope["payload"] = _fast_loads(message.payload)
    except ValueError:  # not strict JSON text: keep the bytes exact
        envelope["payload_base64"] = _base64(message.payload)
    if message.metadata_view:
        envelope["metadata"] = message.metadata_view
    return _dump(envelope)


def _json_payload_bytes(value: Any) -> bytes:
    return _fast_dumps(value)


_ENVELOPE_ENCODERS = {"normal": _text_envelope, "text": _text_envelope, "json": _json_envelope}


# --- decoding ----------------------------------------------------------------------------


class DecodeResult:
    """Messages decoded from a run of records, and the records that could not be decoded."""

    __slots__ = ("errors", "messages")

    def __init__(self, messages: list[Message], errors: list[tuple[int, str]]) -> None:
        self.messages = messages
        #: (byte offset of the record, why it could not be decoded)
        self.errors = errors


def decode_records(
    records: list[bytes], offsets: Sequence[int], fmt: str, id_base: int
) -> DecodeResult:
    """Decode complete records (without delimiters); `offsets[i]` is where record i starts."""
    # Decoding makes objects by the thousand that cannot form a cycle; with the cyclic GC on
    # they trigger collection after collection (10-25% of a read), so it is paused while
    # they are made (as twainmq's consumer does). The parsed envelopes are gone before it
    # resumes, so a collection then has only the messages to look at, if it runs at all.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _decode(records, offsets, fmt, id_base)
    finally:
        if collecting:
            gc.enable()


def _decode(records: list[bytes], offsets: Sequence[int], fmt: str, id_base: int) -> DecodeResult:
    if fmt == "raw":
        return DecodeResult(
            [
                _trusted(record, NO_METADATA, id_base | offset)
                for record, offset in zip(records, offsets)
            ],
            [],
        )
    if b"" in records:  # blank lines between envelopes are not records
        kept = [(record, offset) for record, offset in zip(records, offsets) if record]
        records, offsets = [r for r, _ in kept], [o for _, o in kept]
    json_payload = fmt == "json"
    try:
        messages = _decode_envelopes(records, json_payload)
    except _DECODE_ERRORS:  # any surprise falls back to record by record
        return _decode_one_by_one(records, offsets, json_payload)
    return DecodeResult(messages, [])


def _decode_envelopes(records: list[bytes], json_payload: bool) -> list[Message]:
    """All records with one parse; raises on anything unexpected."""
    envelopes = _fast_loads(b"[" + b",".join(records) + b"]")
    if len(envelopes) != len(records):  # a record held more than one JSON value
        raise ValueError("record count mismatch")
    if json_payload:
        return [_from_envelope(envelope, json_payload) for envelope in envelopes]
    return messages_from_envelopes(envelopes)


def _decode_one_by_one(
    records: list[bytes], offsets: Sequence[int], json_payload: bool
) -> DecodeResult:
    messages: list[Message] = []
    errors: list[tuple[int, str]] = []
    for record, offset in zip(records, offsets):
        try:
            messages.append(_from_envelope(json.loads(record), json_payload))
        except _DECODE_ERRORS as error:
            errors.append(
                (
                    offset,
                    f"not a message envelope ({error}); for plain lines "
                    "such as JSON Lines use format: raw",
                )
            )
    return DecodeResult(messages, errors)


_DECODE_ERRORS = (ValueError, TypeError, KeyError, AttributeError)


def _from_envelope(envelope: dict[str, Any], json_payload: bool) -> Message:
    if type(envelope) is not dict:
        raise TypeError(f"expected a JSON object, got {type(envelope).__name__}")
    metadata = envelope.get("metadata") or {}
    if type(metadata) is not dict or not all(type(v) is str for v in metadata.values()):
        raise TypeError("`metadata` must be an object of strings")
    return _trusted(
        _payload_of(envelope, json_payload), metadata, _id_of(envelope.get("message_id"))
    )


def _payload_of(envelope: dict[str, Any], json_payload: bool) -> bytes:
    if "payload" not in envelope:
        if "payload_base64" in envelope:
            return binascii.a2b_base64(envelope["payload_base64"])
        raise KeyError("no `payload` or `payload_base64`")
    value = envelope["payload"]
    if json_payload:
        return _json_payload_bytes(value)
    if type(value) is str:
        return value.encode()
    if type(value) is list:
        try:
            return bytes(value)  # mq-bridge-py 0.3.2 writes bytes as a list of numbers
        except (TypeError, ValueError):
            pass
    return _json_payload_bytes(value)  # a `json` format file read as `normal`


def _id_of(value: Any) -> int:
    if type(value) is str and len(value) == 36:  # the UUID text we write: parse it cheaply
        digits = value.replace("-", "")
        if len(digits) == 32:
            try:
                return int(digits, 16)
            except ValueError:
                pass
    if value is None:
        raise KeyError("no `message_id`")
    return normalize_message_id(value)
