"""Message <-> MongoDB document, pure functions (no I/O).

The document layout is mq-bridge's (observed in its source and on the wire), so either side
reads the other's documents::

    {
      "_id":          UUID(message id)       BSON binary subtype 4  (id_format "uuid")
                      "0190c3...e9"          32 hex digits          (id_format "hex")
      "payload":      Binary(bytes)          format "normal"
                      {...} / [...] / 1 ...  format "json": the payload as a BSON value
                      "text"                 format "text": the payload as a string
      "metadata":     {"key": "value", ...}  strings only; never mqb.src.*
      "locked_until": null | seconds         the work queue's lease (epoch seconds)
      "locked_by":    "claim token"          ours: which claim holds the lease
      "created_at":   DateTime               what a `ttl_seconds` index expires on
    }

Format "raw" writes the JSON object payload itself as the document (with `_id` = the id
when the object has none); a payload that is not a JSON object falls back to the layout
above, and so does a message carrying ``reply_to``/``correlation_id`` (as mq-bridge does:
a request must keep them). A document without a `payload` field reads as a raw document:
the payload is the document as JSON (without `_id` when it is a message id, and without
the lease fields), the metadata ``{"mq_bridge.original_format": "raw"}``.

Reading, `payload` may be binary (bytes), a string (UTF-8 bytes) or any other BSON value
(compact relaxed extended JSON), whatever the reader's `format`. The id comes from `_id`
when it is a UUID (any 16-byte binary, a `uuid.UUID`, or UUID/32-hex text); otherwise a
stable id is derived from the collection and `_id`.
"""

from __future__ import annotations

import base64
import datetime
import json
import uuid
from collections.abc import Mapping
from typing import Any

from bson import Binary, json_util

from mq_bridge.endpoints.kit.source_metadata import SOURCE_PREFIX, drop_source_keys
from mq_bridge.endpoints.kit.wire import position_id
from mq_bridge.message import NO_METADATA, Message

__all__ = [
    "BOOKKEEPING_FIELDS",
    "RAW_FORMAT_KEY",
    "change_stream_match",
    "document_for",
    "document_id",
    "emulator_value",
    "id_from_document_id",
    "is_bookkeeping",
    "message_from_document",
    "reply_document",
]

#: Fields the endpoint adds for itself: never part of a raw document's payload.
BOOKKEEPING_FIELDS = frozenset({"locked_until", "locked_by", "created_at"})
#: The metadata mq-bridge gives a message read from a raw document.
RAW_FORMAT_KEY = "mq_bridge.original_format"
_RAW_METADATA = {RAW_FORMAT_KEY: "raw"}
_REQUEST_KEYS = ("correlation_id", "reply_to")
_JSON_OPTIONS = json_util.RELAXED_JSON_OPTIONS
_BINARY_SUBTYPE_UUID = 4


def document_id(id_value: int, id_format: str) -> Any:
    """The `_id` for a message id: a BSON UUID (mq-bridge's) or 32 hex digits."""
    if id_format == "hex":
        return f"{id_value:032x}"
    return Binary(id_value.to_bytes(16, "big"), _BINARY_SUBTYPE_UUID)


def id_from_document_id(value: Any) -> int | None:
    """The message id an `_id` holds, or None when it is not a message id."""
    if isinstance(value, bytes) and len(value) == 16:  # Binary is a bytes subclass
        return int.from_bytes(value, "big")
    if isinstance(value, uuid.UUID):
        return value.int
    if isinstance(value, str) and 32 <= len(value) <= 36:
        try:
            return uuid.UUID(value).int
        except ValueError:
            return None
    return None


def document_for(
    message: Message, storage_format: str, id_format: str, now: datetime.datetime
) -> dict[str, Any]:
    """The document that stores `message` (see the module docstring)."""
    metadata = message.metadata_view
    if metadata and any(key.startswith(SOURCE_PREFIX) for key in metadata):
        metadata = drop_source_keys(dict(metadata))
    id_value = document_id(message.id_int, id_format)
    if storage_format == "raw" and not any(key in metadata for key in _REQUEST_KEYS):
        raw = _json_object(message.payload)
        if raw is not None:
            raw.setdefault("_id", id_value)
            return raw
    return {
        "_id": id_value,
        "payload": _payload_value(message.payload, storage_format),
        "metadata": metadata,
        "locked_until": None,
        "created_at": now,
    }


def reply_document(
    reply: Message, correlation_id: str, id_format: str, now: datetime.datetime
) -> dict[str, Any]:
    """A reply as mq-bridge's responders write it: the normal layout, `correlation_id`
    in the metadata (the requester finds it by ``metadata.correlation_id``)."""
    answer = reply.with_metadata(correlation_id=correlation_id)
    return document_for(answer, "normal", id_format, now)


def _payload_value(payload: bytes, storage_format: str) -> Any:
    if storage_format == "json":
        try:
            value = json.loads(payload)
        except ValueError:
            return Binary(payload)
        if _fits_bson(value):
            return value
    elif storage_format == "text":
        try:
            return payload.decode("utf-8")
        except UnicodeDecodeError:
            pass
    return Binary(payload)


def _fits_bson(value: Any) -> bool:
    """False for JSON that BSON cannot hold: integers beyond 64 bits."""
    if isinstance(value, int) and not isinstance(value, bool):
        return -(1 << 63) <= value < (1 << 63)
    if isinstance(value, dict):
        return all(_fits_bson(item) for item in value.values())
    if isinstance(value, list):
        return all(_fits_bson(item) for item in value)
    return True


def _json_object(payload: bytes) -> dict[str, Any] | None:
    try:
        value = json_util.loads(payload)
    except (ValueError, TypeError):
        return None
    return value if isinstance(value, dict) and _fits_bson(value) else None


def message_from_document(
    document: Mapping[str, Any], collection: str, extra: dict[str, str] | None = None
) -> Message:
    """The message `document` stores (see the module docstring). `extra` metadata (the
    ``mqb.src.*`` fields) is added to it."""
    document_key = document.get("_id")
    id_value = id_from_document_id(document_key)
    if "payload" not in document:
        return _raw_message(document, collection, id_value, extra)
    if id_value is None:
        id_value = position_id("mongodb", collection, _text(document_key))
    payload = _payload_bytes(document["payload"])
    metadata = _metadata(document.get("metadata"))
    if extra:
        metadata = {**metadata, **extra}
    return Message.trusted(payload, metadata or NO_METADATA, id_value)


def _raw_message(
    document: Mapping[str, Any], collection: str, id_value: int | None, extra: dict[str, str] | None
) -> Message:
    body = {key: value for key, value in document.items() if key not in BOOKKEEPING_FIELDS}
    if id_value is not None:
        del body["_id"]
    else:
        id_value = position_id("mongodb", collection, _text(document.get("_id")))
    metadata = {**_RAW_METADATA, **extra} if extra else dict(_RAW_METADATA)
    return Message.trusted(_json_bytes(body), metadata, id_value)


def _payload_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and value.get("__neosqlite_binary__") is True:
        return bytes(emulator_value(value))
    return _json_bytes(value)


def _json_bytes(value: Any) -> bytes:
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except TypeError:  # BSON types (ObjectId, datetime, Decimal128...): extended JSON
        text = json_util.dumps(value, json_options=_JSON_OPTIONS, separators=(",", ":"))
        return text.encode("utf-8")


def _metadata(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping) or not value:
        return {}
    metadata: dict[str, str] = {}
    for key, item in value.items():
        if key.startswith(SOURCE_PREFIX):
            continue  # a writer could forge them
        metadata[key] = item if isinstance(item, str) else _text(item)
    return metadata


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json_util.dumps(value, json_options=_JSON_OPTIONS)


def is_bookkeeping(document: Mapping[str, Any]) -> bool:
    """A document that is not a message: mq-bridge's sequencer (``seq_counter``) and
    cursor (``last_seq``) documents, our cursor documents (``resume_token``)."""
    if "payload" in document:
        return False
    return "seq_counter" in document or "last_seq" in document or "resume_token" in document


def emulator_value(value: Any) -> Any:
    """`value` with NX-27017's change-event encoding of binaries undone.

    The emulator (not mongod) sends binaries inside change events as
    ``{"__neosqlite_binary__": true, "data": <base64>, "subtype": n}`` documents; a real
    server sends BSON binaries, which this leaves alone.
    """
    if isinstance(value, dict):
        if value.get("__neosqlite_binary__") is True and isinstance(value.get("data"), str):
            return Binary(base64.b64decode(value["data"]), int(value.get("subtype", 0)))
        return {key: emulator_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [emulator_value(item) for item in value]
    return value


def change_stream_match(query: Mapping[str, Any]) -> dict[str, Any]:
    """The change stream `$match` for inserted documents that match `query` (a find
    filter): each field is looked up under ``fullDocument``, inside `$and`/`$or`/`$nor`
    too.

    >>> change_stream_match({"type": "a", "$or": [{"n": 1}, {"n": 2}]})
    {'operationType': 'insert', 'fullDocument.type': 'a', '$or': [{'fullDocument.n': 1}, \
{'fullDocument.n': 2}]}
    """
    return {"operationType": "insert", **_prefixed(query)}


def _prefixed(query: Mapping[str, Any]) -> dict[str, Any]:
    prefixed: dict[str, Any] = {}
    for key, value in query.items():
        if key in ("$and", "$or", "$nor") and isinstance(value, list):
            prefixed[key] = [_prefixed(item) for item in value]
        elif key.startswith("$"):
            prefixed[key] = value  # $expr, $text...: left as written
        else:
            prefixed[f"fullDocument.{key}"] = value
    return prefixed
