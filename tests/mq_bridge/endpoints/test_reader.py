"""reader: an output that answers each message with the next message of an input."""

from __future__ import annotations

import pytest

from mq_bridge import Consumer, Message, Publisher, Route
from mq_bridge.config.validation import validation_errors
from mq_bridge.errors import ConfigError, RequestTimeoutError
from tests.mq_bridge.helpers import unique


def test_request_returns_the_next_message_and_acknowledges_it():
    topic = unique("answers")
    with Publisher.from_config({"memory": {"topic": topic}}) as writer:
        writer.send_batch([Message(b"first"), Message(b"second"), Message(b"third")])
    with Publisher.from_config({"reader": {"memory": {"topic": topic}}}) as reader:
        assert reader.request(b"q").payload == b"first"
        reader.send(b"discards one")  # as mq-bridge-py: send pulls and drops a message
        assert reader.request(b"q").payload == b"third"
    with Consumer.from_config({"memory": {"topic": topic}}) as rest:
        assert rest.poll(timeout_ms=20) == []  # all three were acknowledged


def test_a_request_with_nothing_to_read_times_out():
    from mq_bridge.runtime.factory import build_output, new_context

    reader = build_output({"reader": {"memory": {"topic": unique("empty")}}}, new_context("r"))
    reader.connect()
    try:
        with pytest.raises(RequestTimeoutError, match=r"no message within 0\.1 s"):
            reader.request(Message(b"q"), 0.1)
    finally:
        reader.close()


def test_a_route_through_a_reader_fetches_one_message_per_message():
    requests, answers, _out = unique("req"), unique("ans"), unique("out")
    with Publisher.from_config({"memory": {"topic": answers}}) as writer:
        writer.send_batch([Message(b"a1"), Message(b"a2")])
    with Publisher.from_config({"memory": {"topic": requests}}) as writer:
        writer.send_batch([Message(b"r1"), Message(b"r2")])
    seen: list[bytes] = []
    route = Route.from_config({
        "input": {"memory": {"topic": requests}},
        "output": {"reader": {"memory": {"topic": answers}}},
    }).with_handler(lambda m: seen.append(m.payload) or m)  # fmt: skip
    with route, Consumer.from_config({"memory": {"topic": answers}}) as check:
        for _ in range(200):
            if seen == [b"r1", b"r2"] and not check.poll(timeout_ms=10):
                break
    assert seen == [b"r1", b"r2"]


def test_reader_is_output_only_and_its_inner_endpoint_is_validated_as_an_input():
    with pytest.raises(ConfigError, match="cannot be used as an input"):
        Consumer.from_config({"reader": {"memory": {"topic": "t"}}})
    [error] = validation_errors({"reader": {"response": {}}}, "output")
    assert "cannot be used as an input" in error.message
