"""The `mongodb` document format, without a server (`mq_bridge.endpoints.mongodb.codec`)."""

from __future__ import annotations

import base64
import datetime
import uuid

from bson import Binary, ObjectId

from mq_bridge import Message
from mq_bridge.endpoints.kit.wire import position_id
from mq_bridge.endpoints.mongodb.codec import (
    change_stream_match,
    document_for,
    emulator_value,
    is_bookkeeping,
    message_from_document,
)

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
ID = uuid.UUID("0190c3b2-0000-7000-8000-000000000001")


def test_reads_the_documents_mq_bridge_writes() -> None:
    """mq-bridge 1.2.0's document (observed on the wire): a BSON UUID `_id`, a binary
    payload, string metadata, and its own `insert_order`, which is not ours to keep."""
    document = {
        "_id": Binary(ID.bytes, 4),
        "payload": Binary(b'{"n":1}'),
        "metadata": {"kind": "x"},
        "insert_order": Binary(b"\x01" * 16),
        "locked_until": None,
        "created_at": NOW,
    }
    message = message_from_document(document, "orders")
    assert (message.id, message.payload, message.metadata) == (str(ID), b'{"n":1}', {"kind": "x"})
    assert message_from_document({**document, "_id": ID}, "orders").id == str(ID)


def test_writes_mq_bridges_layout() -> None:
    message = Message(b"\x00x", {"k": "v", "mqb.src.nats_subject": "s"}, ID)
    document = document_for(message, "normal", "uuid", NOW)
    assert document == {
        "_id": Binary(ID.bytes, 4),
        "payload": Binary(b"\x00x"),
        "metadata": {"k": "v"},  # mqb.src.* never travels
        "locked_until": None,
        "created_at": NOW,
    }
    assert document_for(message, "normal", "hex", NOW)["_id"] == ID.hex


def test_raw_documents_read_as_json_with_their_id_when_it_is_a_message_id() -> None:
    own = message_from_document({"_id": ID.hex, "type": "a", "locked_until": 5.0}, "c")
    assert (own.id, own.json()) == (str(ID), {"type": "a"})
    assert own.metadata == {"mq_bridge.original_format": "raw"}
    object_id = ObjectId("65a000000000000000000001")
    other = message_from_document({"_id": object_id, "n": 1}, "c")
    assert other.json() == {"_id": {"$oid": str(object_id)}, "n": 1}
    assert other.id_int == position_id("mongodb", "c", '{"$oid": "65a000000000000000000001"}')


def test_raw_format_keeps_requests_wrapped_and_non_objects_too() -> None:
    request = Message(b'{"a": 1}', {"reply_to": "c_replies", "correlation_id": "1"}, ID)
    assert "payload" in document_for(request, "raw", "hex", NOW)
    assert "payload" in document_for(Message(b"[1, 2]", None, ID), "raw", "hex", NOW)
    assert document_for(Message(b'{"a": 1}', None, ID), "raw", "hex", NOW) == {
        "_id": ID.hex,
        "a": 1,
    }


def test_json_too_big_for_bson_is_stored_as_binary() -> None:
    payload = b'{"n": 100000000000000000000}'
    document = document_for(Message(payload, None, ID), "json", "hex", NOW)
    assert document["payload"] == Binary(payload)


def test_the_emulators_change_event_binaries_are_undone() -> None:
    shape = {"__neosqlite_binary__": True, "data": base64.b64encode(b"ab").decode(), "subtype": 0}
    assert emulator_value({"_id": shape, "x": [shape], "y": 1}) == {
        "_id": Binary(b"ab"),
        "x": [Binary(b"ab")],
        "y": 1,
    }


def test_bookkeeping_documents_are_recognised() -> None:
    assert is_bookkeeping({"_id": "orders:sequencer", "seq_counter": 3})
    assert is_bookkeeping({"_id": "cursor:a", "last_seq": 3})
    assert is_bookkeeping({"_id": "cursor:a", "resume_token": {"_data": "x"}})
    assert not is_bookkeeping({"_id": "x", "payload": b"", "seq_counter": 1})


def test_change_stream_match_looks_under_full_document() -> None:
    assert change_stream_match({}) == {"operationType": "insert"}
    assert change_stream_match({"metadata.kind": "a", "$nor": [{"n": 1}]}) == {
        "operationType": "insert",
        "fullDocument.metadata.kind": "a",
        "$nor": [{"fullDocument.n": 1}],
    }
