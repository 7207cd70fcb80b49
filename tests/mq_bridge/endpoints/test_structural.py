"""static, null, response, fanout and switch."""

from __future__ import annotations

import pytest

from mq_bridge import Consumer, Message, Publisher, Route
from mq_bridge.errors import ConfigError
from tests.mq_bridge.helpers import read, unique


def test_static_input_hands_out_copies_of_its_body_with_fresh_ids():
    with Consumer.from_config({"static": {"body": '{"ok":true}', "metadata": {"a": "b"}}}) as c:
        first, second = c.poll(max=2, timeout_ms=10)
        c.commit()
    assert first.json() == {"ok": True} and first.metadata == {"a": "b"}
    assert first.id != second.id
    with Consumer.from_config({"static": "hello"}) as c:
        assert [m.payload for m in c.poll(max=3)] == [b"hello"] * 3


def test_static_answers_requests_with_the_correlation_id():
    with Publisher.from_config({"static": {"body": "pong", "raw": True}}) as publisher:
        reply = publisher.request(Message(b"ping", {"correlation_id": "c-9"}))
        publisher.send(b"dropped")
    assert (reply.payload, reply.metadata["correlation_id"]) == (b"pong", "c-9")


def test_null_output_drops_and_null_input_never_yields():
    Publisher.from_config({"null": None}).send(b"gone")
    with Consumer.from_config({"null": {}}) as consumer:
        assert consumer.poll(max=5, timeout_ms=10) == []


def test_response_only_works_as_an_output():
    with pytest.raises(ConfigError, match="cannot be used as an input"):
        Route.from_config({"input": {"response": {}}}).start()


def test_fanout_copies_to_every_output_with_their_own_options():
    a, b = unique("a"), unique("b")
    with Publisher.from_config(
        {"fanout": [{"memory": {"topic": a}}, {"memory": {"topic": b}}, {"null": None}]}
    ) as publisher:
        publisher.send_batch([b"1", b"2"])
    assert [m.payload for m in read(a, 2, 5.0)] == [b"1", b"2"]
    assert [m.payload for m in read(b, 2, 5.0)] == [b"1", b"2"]


def test_fanout_reports_a_message_failed_anywhere_as_failed():
    full = unique("full")
    config = {
        "fanout": [
            {"memory": {"topic": unique("ok")}},
            {"memory": {"topic": full, "capacity": 1, "send_timeout_ms": 10}},
        ]
    }
    with Publisher.from_config(config) as publisher, pytest.raises(Exception) as raised:
        publisher.send_batch([b"1", b"2"])
    assert sorted(raised.value.failures) == [1]  # type: ignore[attr-defined]


def test_switch_routes_by_metadata_value_with_a_default():
    orders, other = unique("orders"), unique("other")
    config = {
        "switch": {
            "metadata_key": "kind",
            "cases": {"order": {"memory": {"topic": orders}}},
            "default": {"memory": {"topic": other}},
        }
    }
    with Publisher.from_config(config) as publisher:
        publisher.send(b"1", {"kind": "order"})
        publisher.send(b"2", {"kind": "refund"})
        publisher.send(b"3")
        publisher.send(b"4", {"kind": "order"})
    assert [m.payload for m in read(orders, 2, 5.0)] == [b"1", b"4"]
    assert [m.payload for m in read(other, 2, 5.0)] == [b"2", b"3"]


def test_switch_without_a_default_fails_unmatched_messages_for_good():
    orders = unique("orders")
    config = {"switch": {"metadata_key": "kind", "cases": {"order": {"memory": {"topic": orders}}}}}
    with Publisher.from_config(config) as publisher, pytest.raises(Exception) as raised:
        publisher.send_batch([Message(b"1", {"kind": "order"}), Message(b"2", {"kind": "x"})])
    assert list(raised.value.failures) == [1]  # type: ignore[attr-defined]
    assert not raised.value.retriable  # type: ignore[attr-defined]
    assert [m.payload for m in read(orders, 1, 5.0)] == [b"1"]


def test_switch_predicate_mode_picks_the_first_case_that_holds():
    big, vip, rest = unique("big"), unique("vip"), unique("rest")
    config = {
        "switch": {
            "when": [
                {"if": 'amount > 100 && meta.kind == "order"', "to": {"memory": {"topic": big}}},
                {"if": "customer.vip || amount < 0", "to": {"memory": {"topic": vip}}},
            ],
            "default": {"memory": {"topic": rest}},
        }
    }
    with Publisher.from_config(config) as publisher:
        publisher.send_json({"amount": 150}, {"kind": "order"})
        publisher.send_json({"amount": 150, "customer": {"vip": True}}, {"kind": "refund"})
        publisher.send_json({"amount": -5})
        publisher.send_json({"amount": 5})
        publisher.send(b"not json")
    assert [m.json()["amount"] for m in read(big, 1, 5.0)] == [150]
    assert [m.json()["amount"] for m in read(vip, 2, 5.0)] == [150, -5]
    assert [m.payload for m in read(rest, 2, 5.0)] == [b'{"amount":5}', b"not json"]


@pytest.mark.parametrize(
    ("expression", "problem"),
    [("amount >", "cannot parse"), ('__import__("os")', "uses Call"), ("a + b", "unexpected")],
)
def test_switch_rejects_bad_expressions_naming_the_case(expression, problem):
    config = {"switch": {"when": [{"if": expression, "to": {"null": None}}]}}
    with pytest.raises(ConfigError, match=rf"switch\.when\[0\]\.if: .*{problem}"):
        Publisher.from_config(config)
