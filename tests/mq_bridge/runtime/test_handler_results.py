"""What a handler returns becomes the forwarded message (docs: mq_bridge/_handler.py)."""

from __future__ import annotations

import asyncio

import pytest

from mq_bridge import Message, Publisher, Route
from tests.mq_bridge.helpers import read, unique


def run_one(handler, message: Message, **route_options) -> list[Message]:  # type: ignore[no-untyped-def]
    """Send `message` through a memory route with `handler`; what reached the output."""
    source, sink = unique("in"), unique("out")
    config = {
        "input": {"memory": {"topic": source}},
        "output": {"memory": {"topic": sink}},
        **route_options,
    }
    with (
        Route.from_config(config).with_handler(handler),
        Publisher.from_config({"memory": {"topic": source}}) as publisher,
    ):
        publisher.send(message)
        return read(sink, 1, timeout=5.0)


SOURCE = Message(b'{"n": 1}', {"kind": "order", "tenant": "t1"}, id="order-1")


def raw(message: Message) -> bytes:  # the handlers of the precedence table below
    return b"raw"


def raw2(message: Message) -> bytes:
    return b"raw2"


def k1(data: object) -> bytes:
    return b"k1"


def k2(data: object) -> bytes:
    return b"k2"


@pytest.mark.parametrize(
    ("result", "payload"),
    [
        (b"raw", b"raw"),
        ("tekst \u00e9", "tekst \u00e9".encode()),
        ({"a": [1, 2]}, b'{"a":[1,2]}'),
        ([1, "x"], b'[1,"x"]'),
        (7, b"7"),
        (True, b"true"),
    ],
)
def test_values_become_payloads_keeping_the_input_id_and_metadata(result, payload):
    (out,) = run_one(lambda message: result, SOURCE)
    assert out.payload == payload
    assert out.id == SOURCE.id
    assert out.metadata == SOURCE.metadata


def test_none_forwards_nothing():
    source, sink = unique("in"), unique("out")
    config = {"input": {"memory": {"topic": source}}, "output": {"memory": {"topic": sink}}}
    route = Route.from_config(config).with_handler(lambda m: None if m.payload == b"x" else m)
    with route, Publisher.from_config({"memory": {"topic": source}}) as publisher:
        publisher.send(b"x")
        publisher.send(b"kept")
        outs = read(sink, 1, timeout=5.0)
    assert [m.payload for m in outs] == [b"kept"]
    assert read(sink, 1, timeout=0.05) == []


def test_a_returned_message_is_forwarded_as_is():
    reply = Message(b"other", {"x": "y"}, id="reply-1")
    (out,) = run_one(lambda message: reply, SOURCE)
    assert (out.payload, out.metadata, out.id) == (b"other", {"x": "y"}, reply.id)


def test_with_json_and_with_payload_keep_id_and_metadata():
    (out,) = run_one(lambda m: m.with_json({"seen": m.json()["n"]}), SOURCE)
    assert (out.json(), out.id, out.metadata) == ({"seen": 1}, SOURCE.id, SOURCE.metadata)
    (out,) = run_one(lambda m: m.with_payload(m.text().upper().encode()), SOURCE)
    assert out.payload == b'{"N": 1}'


def test_correlation_id_carries_over_even_onto_a_returned_message():
    """Only a request's correlation_id is carried (docs/compat.md: the peers add one to
    every result, which costs the pass-through route ~15 %)."""
    source = Message(b"q", {"correlation_id": "c-1"})
    (out,) = run_one(lambda message: Message(b"a"), source)
    assert out.metadata == {"correlation_id": "c-1"}


def test_kind_handlers_get_json_and_a_raw_handler_is_the_fallback():
    source, sink = unique("in"), unique("out")
    route = Route.from_config(
        {"input": {"memory": {"topic": source}}, "output": {"memory": {"topic": sink}}}
    )
    route.with_handler(lambda message: b"fallback:" + message.payload)
    route.add_handler("order.created", lambda data: {"order": data["id"]})
    with route, Publisher.from_config({"memory": {"topic": source}}) as publisher:
        publisher.send_json({"id": 42}, {"kind": "order.created"})
        publisher.send(b"other", {"kind": "unknown"})
        publisher.send(b"plain")
        outs = read(sink, 3, timeout=5.0)
    assert [m.payload for m in outs] == [b'{"order":42}', b"fallback:other", b"fallback:plain"]


@pytest.mark.parametrize(
    ("build", "kind", "called"),
    [
        (lambda r: r.add_handler("o", k1).with_handler(raw), "o", b"raw"),
        (lambda r: r.with_handler(raw).add_handler("o", k1), "o", b"k1"),
        (lambda r: r.with_handler(raw).add_handler("o", k1), "other", b"raw"),
        (lambda r: r.add_handler("o", k1).with_handler(raw).add_handler("x", k2), "o", b"raw"),
        (lambda r: r.add_handler("o", k1).with_handler(raw).add_handler("x", k2), "x", b"k2"),
        (lambda r: r.with_handler(raw).add_handler("o", k1).with_handler(raw2), "o", b"raw2"),
        (lambda r: r.add_handler("o", k1).add_handler("o", k2), "o", b"k2"),
    ],
    ids=[
        "raw after kind replaces it",
        "kind after raw takes its kind",
        "kind after raw leaves raw the rest",
        "a kind added after a raw one that replaced kinds",
        "the kind added last",
        "the last raw replaces kinds added before it",
        "the last handler of a kind",
    ],
)
def test_handler_precedence_is_the_peers(build, kind, called):
    """Both peers: `with_handler` replaces every handler set before it (kinds too); kinds
    added after it take their kinds and leave it the rest."""
    source, sink = unique("in"), unique("out")
    route = build(
        Route.from_config(
            {"input": {"memory": {"topic": source}}, "output": {"memory": {"topic": sink}}}
        )
    )
    with route, Publisher.from_config({"memory": {"topic": source}}) as publisher:
        publisher.send(b"{}", {"kind": kind})
        (out,) = read(sink, 1, timeout=5.0)
    assert out.payload == called


def test_a_kind_without_handler_or_fallback_is_dropped_and_the_route_goes_on(caplog):
    source, sink = unique("in"), unique("out")
    route = Route.from_config(
        {"input": {"memory": {"topic": source}}, "output": {"memory": {"topic": sink}}}
    ).add_handler("known", lambda data: data)
    with route, Publisher.from_config({"memory": {"topic": source}}) as publisher:
        publisher.send_json({"a": 1}, {"kind": "unknown"})
        publisher.send_json({"b": 2}, {"kind": "known"})
        outs = read(sink, 1, timeout=5.0)
    assert [m.json() for m in outs] == [{"b": 2}]
    assert read(sink, 1, timeout=0.05) == []
    assert "no handler for kind 'unknown'" in caplog.text


def test_coroutine_handlers_work_raw_and_by_kind():
    async def double(message: Message) -> dict:
        await asyncio.sleep(0)
        return {"n": message.json()["n"] * 2}

    (out,) = run_one(double, SOURCE)
    assert out.json() == {"n": 2}

    async def by_kind(data: dict) -> dict:
        await asyncio.sleep(0)
        return {"kind_n": data["n"]}

    source, sink = unique("in"), unique("out")
    route = Route.from_config(
        {"input": {"memory": {"topic": source}}, "output": {"memory": {"topic": sink}}}
    ).add_handler("order", by_kind)
    with route, Publisher.from_config({"memory": {"topic": source}}) as publisher:
        for n in range(5):
            publisher.send_json({"n": n}, {"kind": "order"})
        outs = read(sink, 5, timeout=5.0)
    assert [m.json() for m in outs] == [{"kind_n": n} for n in range(5)]


def test_no_handler_forwards_messages_unchanged():
    source, sink = unique("in"), unique("out")
    config = {"input": {"memory": {"topic": source}}, "output": {"memory": {"topic": sink}}}
    with Route.from_config(config), Publisher.from_config({"memory": {"topic": source}}) as p:
        p.send(SOURCE)
        (out,) = read(sink, 1, timeout=5.0)
    assert out == SOURCE


def test_batch_size_one_and_concurrency_keep_every_message():
    for options in ({"batch_size": 1}, {"concurrency": 3, "batch_size": 4}):
        source, sink = unique("in"), unique("out")
        config = {
            "input": {"memory": {"topic": source}},
            "output": {"memory": {"topic": sink, "capacity": 0}},
            **options,
        }
        route = Route.from_config(config).with_handler(lambda m: m)
        with route, Publisher.from_config({"memory": {"topic": source}}) as publisher:
            for n in range(200):
                publisher.send_json({"n": n})
            outs = read(sink, 200, timeout=10.0)
        assert sorted(m.json()["n"] for m in outs) == list(range(200))
