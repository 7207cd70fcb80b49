"""Publisher: send, send_json, send_batch, request, request_json, close."""

from __future__ import annotations

import uuid

import pytest

from mq_bridge import Message, Publisher, Route
from mq_bridge.errors import ClosedError, RequestTimeoutError, SendTimeoutError
from tests.mq_bridge.helpers import read, unique


def test_send_bytes_with_metadata_a_message_and_json_with_an_id():
    topic = unique("pub")
    with Publisher.from_config({"memory": {"topic": topic}}) as publisher:
        publisher.send(b"raw", {"k": "v"})
        publisher.send(Message(b"msg", {"extra": "1"}, id="fixed"))
        publisher.send_json({"a": 1}, {"kind": "x"}, id="0x10")
    raw, msg, doc = read(topic, 3, 5.0)
    assert (raw.payload, raw.metadata) == (b"raw", {"k": "v"})
    assert (msg.id, msg.metadata) == (Message(b"", id="fixed").id, {"extra": "1"})
    assert (doc.json(), doc.metadata, doc.id) == ({"a": 1}, {"kind": "x"}, str(uuid.UUID(int=16)))


def test_a_message_with_metadata_beside_it_is_a_type_error_and_nothing_is_sent():
    """Both peers: metadata goes with bytes only; a Message carries its own (even {})."""
    topic = unique("pub")
    with Publisher.from_config({"memory": {"topic": topic}}) as publisher:
        for metadata in ({"x": "1"}, {}):
            with pytest.raises(TypeError, match="metadata must be None when message is a Message"):
                publisher.send(Message(b"m"), metadata)
            with pytest.raises(TypeError, match="metadata must be None when message is a Message"):
                publisher.request(Message(b"m"), metadata)
        publisher.send(Message(b"m"), None)
    assert [m.payload for m in read(topic, 5, 0.5)] == [b"m"]


def test_send_batch_keeps_order():
    topic = unique("pub")
    with Publisher.from_config({"memory": {"topic": topic}}) as publisher:
        publisher.send_batch(Message(f"{i}".encode()) for i in range(5))
        publisher.send_batch([])
    assert [m.payload for m in read(topic, 5, 5.0)] == [b"0", b"1", b"2", b"3", b"4"]


def test_bad_values_are_rejected_with_a_clear_error():
    with Publisher.from_config({"memory": {"topic": unique("pub")}}) as publisher:
        with pytest.raises(ValueError, match="not JSON-serializable"):
            publisher.send_json({"when": object()})
        with pytest.raises(TypeError, match="metadata must map str to str"):
            publisher.send_json({}, {"n": 1})  # type: ignore[dict-item]
        with pytest.raises(TypeError, match="a Message instance or bytes-like payload"):
            publisher.send("text")  # type: ignore[arg-type]


def test_a_full_topic_with_no_reader_raises_instead_of_blocking_forever():
    config = {"memory": {"topic": unique("full"), "capacity": 2, "send_timeout_ms": 30}}
    with Publisher.from_config(config) as publisher:
        publisher.send(b"1")
        publisher.send(b"2")
        with pytest.raises(SendTimeoutError, match="stayed full"):
            publisher.send(b"3")


def test_request_and_request_json_get_the_reply_of_a_response_route():
    topic = unique("rpc")
    route = Route.from_config(
        {"input": {"memory": {"topic": topic}}, "output": {"response": {}}}
    ).with_handler(lambda m: {"echo": m.json(), "kind": m.metadata.get("kind")})
    with route, Publisher.from_config({"memory": {"topic": topic, "request_reply": True}}) as p:
        reply = p.request_json({"q": 1}, {"kind": "ask"})
        assert reply.json() == {"echo": {"q": 1}, "kind": "ask"}
        assert reply.metadata["correlation_id"]
        assert p.request(Message(b'"raw"')).json() == {"echo": "raw", "kind": None}
        p.send_json({"q": 2})  # with request_reply, send waits for the reply too


def test_request_times_out_with_a_clear_error_when_nobody_answers():
    config = {"memory": {"topic": unique("rpc"), "request_reply": True, "request_timeout_ms": 30}}
    publisher = Publisher.from_config(config)
    with publisher, pytest.raises(RequestTimeoutError, match="no reply") as raised:
        publisher.request(b"hello?")
    assert isinstance(raised.value, TimeoutError) and raised.value.retriable


def test_close_is_idempotent_and_later_sends_raise():
    publisher = Publisher.from_config({"memory": {"topic": unique("pub")}})
    publisher.close()
    publisher.close()
    for call in (
        lambda: publisher.send(b"x"),
        lambda: publisher.send_json({}),
        lambda: publisher.send_batch([b"x"]),
        lambda: publisher.request(b"x"),
    ):
        with pytest.raises(ClosedError, match="closed"):
            call()


def test_publishers_come_from_files_strings_and_named_sections(tmp_path):
    topic = unique("pub")
    text = f"publishers:\n  orders:\n    memory:\n      topic: {topic}\n"
    path = tmp_path / "bridge.yaml"
    path.write_text(text)
    Publisher.from_file(str(path), "orders").send(b"file")
    Publisher.from_str(text, "orders").send(b"str")
    Publisher.from_config({"publishers": {"orders": {"memory": {"topic": topic}}}}, "orders").send(
        b"dict"
    )
    with pytest.warns(DeprecationWarning):
        Publisher.from_yaml(str(path), "orders").send(b"yaml")
    assert [m.payload for m in read(topic, 4, 5.0)] == [b"file", b"str", b"dict", b"yaml"]
