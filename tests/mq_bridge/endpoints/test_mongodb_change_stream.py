"""The `mongodb` change stream input (subscriber mode) against NX-27017.

NX-27017 opens change streams on a collection and resumes them from a token; it sends
binaries inside events in its own shape, which the endpoint undoes (see
`codec.emulator_value`). What a real replica set adds (resume across a server restart,
history lost errors) is not covered here.
"""

from __future__ import annotations

from typing import Any

import pymongo
import pytest

from mq_bridge import Message
from tests.mq_bridge.endpoints.test_mongodb import DATABASE, collection, config, documents, drain
from tests.mq_bridge.helpers import open_input, open_output

pytestmark = pytest.mark.mongodb
__all__ = ["collection"]  # the fixture, used by name


def subscriber(url: str, name: str, **options: Any) -> dict[str, Any]:
    return config(url, name, change_stream=True, **options)


def test_every_subscriber_sees_every_inserted_document(mongodb_url: str, collection: str) -> None:
    output = open_output(config(mongodb_url, collection))
    subscribers = [open_input(subscriber(mongodb_url, collection)) for _ in range(2)]
    sent = [Message(b"\x00%d" % i, {"n": str(i)}) for i in range(5)]
    output.send(sent[:3])
    output.send_one(sent[3])
    output.send_one(sent[4])
    for source in subscribers:
        got = drain(source, 5)
        assert [(m.id, m.payload, m.metadata) for m in got] == [
            (m.id, m.payload, m.metadata) for m in sent
        ]
        source.close()
    assert len(documents(mongodb_url, collection)) == 5  # nothing is deleted
    output.close()


def test_a_subscriber_starts_at_the_end_without_a_cursor(mongodb_url: str, collection: str) -> None:
    output = open_output(config(mongodb_url, collection))
    output.send_one(Message(b"before"))
    source = open_input(subscriber(mongodb_url, collection))
    output.send_one(Message(b"after"))
    assert [m.payload for m in drain(source, 2, timeout=2.0)] == [b"after"]
    source.close()
    output.close()


def test_cursor_id_resumes_after_the_last_acknowledged_event(
    mongodb_url: str, collection: str
) -> None:
    cfg = subscriber(mongodb_url, collection, cursor_id="reader-1")
    output = open_output(config(mongodb_url, collection))
    first = open_input(cfg)
    output.send([Message(b"%d" % i) for i in range(5)])
    acked = first.receive(3, 10.0)
    assert [m.payload for m in acked.messages] == [b"0", b"1", b"2"]
    first.ack(acked)
    unacked = first.receive(2, 10.0)
    assert [m.payload for m in unacked.messages] == [b"3", b"4"]
    first.close()  # 3 and 4 were never acked
    output.send_one(Message(b"5"))
    again = open_input(cfg)
    assert [m.payload for m in drain(again, 3)] == [b"3", b"4", b"5"]
    again.close()
    with pymongo.MongoClient(mongodb_url) as client:
        stored = client[DATABASE][collection].find_one({"_id": "cursor:reader-1"})
    assert stored is not None and stored["resume_token"]
    output.close()


def test_the_cursor_lives_in_meta_collection_when_given(mongodb_url: str, collection: str) -> None:
    meta = f"{collection}_cursors"
    cfg = subscriber(mongodb_url, collection, cursor_id="c", meta_collection=meta)
    source = open_input(cfg)
    output = open_output(config(mongodb_url, collection))
    output.send_one(Message(b"x"))
    assert len(drain(source, 1)) == 1
    assert [d["_id"] for d in documents(mongodb_url, meta)] == ["cursor:c"]
    assert len(documents(mongodb_url, collection)) == 1
    source.close()
    output.close()


def test_a_nacked_batch_is_delivered_again_in_order(mongodb_url: str, collection: str) -> None:
    output = open_output(config(mongodb_url, collection))
    source = open_input(subscriber(mongodb_url, collection))
    output.send([Message(b"%d" % i) for i in range(4)])
    first, second = source.receive(2, 10.0), source.receive(2, 10.0)
    source.nack(second)
    source.nack(first)
    assert [m.payload for m in drain(source, 4)] == [b"0", b"1", b"2", b"3"]
    source.close()
    output.close()


def test_receive_query_filters_the_stream(mongodb_url: str, collection: str) -> None:
    output = open_output(config(mongodb_url, collection))
    source = open_input(subscriber(mongodb_url, collection, receive_query='{"metadata.kind": "a"}'))
    output.send([Message(b"%d" % i, {"kind": "a" if i % 2 else "b"}) for i in range(6)])
    assert [m.payload for m in drain(source, 6, timeout=2.0)] == [b"1", b"3", b"5"]
    source.close()
    output.close()


def test_consume_capture_new_is_the_change_stream(mongodb_url: str, collection: str) -> None:
    cfg = config(mongodb_url, collection, consume="capture_new")
    source = open_input(cfg)
    output = open_output(config(mongodb_url, collection))
    output.send_one(Message(b"x"))
    assert [m.payload for m in drain(source, 1)] == [b"x"]
    assert len(documents(mongodb_url, collection)) == 1
    source.close()
    output.close()
