"""Endpoints and middleware written in Python: register_endpoint, register_middleware,
``custom`` and ``ref`` (mq-bridge 1.2.0's plugin interface)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import mq_bridge
from mq_bridge import Consumer, Message, Publisher, Route
from mq_bridge.config.validation import validation_errors
from mq_bridge.errors import ConfigError, EndpointError
from tests.mq_bridge.helpers import unique


class ListSource:
    """An input over a list: hands out `per_batch` items a call, then StopIteration."""

    def __init__(self, route: str, config: dict[str, Any]) -> None:
        self.route = route
        self.items = list(config.get("items", []))
        self.per_batch = config.get("per_batch", 2)
        self.dispositions: list[list[str]] = []
        self.closed = False

    def receive_batch(self, max_messages: int) -> list[Any] | None:
        if not self.items:
            raise StopIteration
        taken, self.items = self.items[: self.per_batch], self.items[self.per_batch :]
        return taken

    def commit(self, dispositions: list[str]) -> None:
        self.dispositions.append(dispositions)

    def close(self) -> None:
        self.closed = True


class ListSink:
    def __init__(self, route: str, config: dict[str, Any]) -> None:
        self.route = route
        self.config = config
        self.sent: list[Message] = []

    def send_batch(self, messages: list[Message]) -> None:
        self.sent.extend(messages)


@pytest.fixture
def registered() -> Iterator[dict[str, list[Any]]]:
    """Registers a source and a sink under unique names; the objects made are kept."""
    made: dict[str, list[Any]] = {"source": [], "sink": []}
    names = {"source": unique("src").replace("-", "_"), "sink": unique("sink").replace("-", "_")}

    def source(route: str, config: dict[str, Any]) -> ListSource:
        made["source"].append(ListSource(route, config))
        return made["source"][-1]

    def sink(route: str, config: dict[str, Any]) -> ListSink:
        made["sink"].append(ListSink(route, config))
        return made["sink"][-1]

    mq_bridge.register_endpoint(names["source"], source)
    mq_bridge.register_endpoint(names["sink"], sink)
    made["names"] = [names["source"], names["sink"]]
    try:
        yield made
    finally:
        for name in names.values():
            mq_bridge.unregister_endpoint(name)


def test_a_route_runs_from_a_python_source_to_a_python_sink(registered):
    source, sink = registered["names"]
    items = [{"n": 1}, b"raw", "text", Message(b"msg", {"k": "v"})]
    route = Route.from_config(
        {"input": {source: {"items": items}}, "output": {sink: {"x": 1}}}, name="plugin-route"
    )
    route.run()  # the source raises StopIteration: the route ends by itself
    [made_source], [made_sink] = registered["source"], registered["sink"]
    assert [m.payload for m in made_sink.sent] == [b'{"n":1}', b"raw", b"text", b"msg"]
    assert made_sink.sent[3].metadata == {"k": "v"}
    assert made_source.route == made_sink.route == "plugin-route"
    assert made_sink.config == {"x": 1}
    assert made_source.dispositions == [["ack", "ack"], ["ack", "ack"]]
    assert made_source.closed


def test_custom_and_ref_are_the_same_endpoint(registered):
    _source, sink = registered["names"]
    with Publisher.from_config({"custom": {"name": sink, "config": {"c": 2}}}) as publisher:
        publisher.send(b"one")
    with Publisher.from_config({"ref": sink}) as publisher:
        publisher.send(b"two")
    first, second = registered["sink"]
    assert (first.config, [m.payload for m in first.sent]) == ({"c": 2}, [b"one"])
    assert (second.config, [m.payload for m in second.sent]) == ({}, [b"two"])


def test_a_consumer_nack_reaches_commit_and_poll_times_out_on_an_empty_source():
    class Waiting:
        def __init__(self) -> None:
            self.calls = 0
            self.dispositions: list[list[str]] = []

        def receive_batch(self, max_messages: int) -> list[bytes] | None:
            self.calls += 1
            return [b"x"] if self.calls == 3 else None

        def commit(self, dispositions: list[str]) -> None:
            self.dispositions.append(dispositions)

    made = Waiting()
    name = unique("waiting").replace("-", "_")
    mq_bridge.register_endpoint(name, lambda route, config: made)
    try:
        with Consumer.from_config({name: None}) as consumer:
            [message] = consumer.poll(timeout_ms=2000)
            consumer.nack()
            assert consumer.poll(timeout_ms=20) == []
        assert message.payload == b"x" and made.dispositions == [["nack"]]
    finally:
        mq_bridge.unregister_endpoint(name)


def test_names_are_checked_and_registering_twice_keeps_the_first(registered):
    source, _sink = registered["names"]
    with pytest.raises(ConfigError, match="registered already"):
        mq_bridge.register_endpoint(source, ListSink)
    with pytest.raises(ConfigError, match="built-in"):
        mq_bridge.register_endpoint("memory", ListSink)
    with pytest.raises(ValueError, match="name 'bad name'"):
        mq_bridge.register_endpoint("bad name", ListSink)
    with pytest.raises(TypeError, match="callable"):
        mq_bridge.register_endpoint("fine", 42)  # type: ignore[arg-type]
    assert isinstance(Consumer.from_config({source: {"items": [b"a"]}}), Consumer)


def test_unknown_names_fail_clearly_and_unregistering_removes_the_endpoint(registered):
    source, _sink = registered["names"]
    with pytest.raises(ConfigError, match=r"ref: no endpoint named 'nope' is registered"):
        Publisher.from_config({"ref": "nope"})
    with pytest.raises(ConfigError, match=r"custom.name: no endpoint named 'nope'"):
        Publisher.from_config({"custom": {"name": "nope", "config": {}}})
    assert validation_errors({"input": {source: {}}}, "route") == []
    assert mq_bridge.unregister_endpoint(source) is True
    assert mq_bridge.unregister_endpoint(source) is False
    with pytest.raises(ConfigError, match="unknown endpoint"):
        Consumer.from_config({source: {}})
    assert validation_errors({"input": {source: {}}}, "route")


def test_an_object_without_the_side_s_method_is_refused_at_build(registered):
    source, sink = registered["names"]
    with pytest.raises(ConfigError, match=r"has no send_batch\(\)"):
        Publisher.from_config({source: {}})
    with pytest.raises(ConfigError, match=r"has no receive_batch\(\)"):
        Consumer.from_config({sink: {}})


def test_close_then_connect_makes_a_new_object(registered):
    source, _sink = registered["names"]
    from mq_bridge.runtime.factory import build_input, new_context

    endpoint = build_input({source: {"items": [b"a", b"b", b"c"]}}, new_context("r"))
    endpoint.connect()
    assert [m.payload for m in endpoint.receive(10, 1).messages] == [b"a", b"b"]
    endpoint.close()
    endpoint.connect()  # the runtime reconnects this way: a fresh object from the factory
    assert [m.payload for m in endpoint.receive(10, 1).messages] == [b"a", b"b"]
    assert len(registered["source"]) == 2 and registered["source"][0].closed
    endpoint.close()


def test_interrupt_ends_a_waiting_receive():
    name = unique("idle").replace("-", "_")
    mq_bridge.register_endpoint(name, lambda route, config: type("Idle", (), {
        "receive_batch": lambda self, n: None})())  # fmt: skip
    try:
        from mq_bridge.runtime.factory import build_input, new_context

        endpoint = build_input({name: {}}, new_context("r"))
        endpoint.connect()
        threading.Timer(0.1, endpoint.interrupt).start()
        started = time.monotonic()
        assert not endpoint.receive(10, 30)
        assert time.monotonic() - started < 10
    finally:
        mq_bridge.unregister_endpoint(name)


def test_user_errors_keep_their_retriable_meaning():
    class Failing:
        def send_batch(self, messages: list[Message]) -> None:
            raise mq_bridge.RetryableError("later")

    name = unique("failing").replace("-", "_")
    mq_bridge.register_endpoint(name, lambda route, config: Failing())
    try:
        publisher = Publisher.from_config({name: {}})
        with publisher, pytest.raises(mq_bridge.RetryableError, match="later"):
            publisher.send(b"x")
    finally:
        mq_bridge.unregister_endpoint(name)


class Stamp:
    """Rewrites on send, drops payloads equal to b"drop" on both sides."""

    def __init__(self, route: str, config: dict[str, Any]) -> None:
        self.tag = config.get("tag", "t")

    def on_receive(self, messages: list[Message]) -> list[Message | None]:
        return [
            None if m.payload == b"drop" else m.with_metadata({"in": self.tag}) for m in messages
        ]

    def on_send(self, messages: list[Message]) -> list[Message | None]:
        return [
            None if m.payload == b"drop" else m.with_metadata({"out": self.tag}) for m in messages
        ]


@pytest.fixture
def stamp() -> Iterator[str]:
    name = unique("stamp").replace("-", "_")
    mq_bridge.register_middleware(name, Stamp)
    try:
        yield name
    finally:
        mq_bridge.unregister_middleware(name)


def test_custom_middleware_rewrites_and_drops_on_both_sides(stamp):
    topic = unique("mw")
    middleware = [{"custom": {"name": stamp, "config": {"tag": "x"}}}]
    with Publisher.from_config({"memory": {"topic": topic}, "middlewares": middleware}) as pub:
        pub.send_batch([Message(b"keep"), Message(b"drop"), Message(b"also")])
    with Consumer.from_config({"memory": {"topic": topic}, "middlewares": middleware}) as con:
        received = con.poll(max=10, timeout_ms=200)
        con.commit()
    assert [m.payload for m in received] == [b"keep", b"also"]
    assert all(m.metadata == {"out": "x", "in": "x"} for m in received)


def test_a_batch_the_middleware_empties_is_acknowledged(stamp):
    topic = unique("mw-drop")
    with Publisher.from_config({"memory": {"topic": topic}}) as pub:
        pub.send_batch([Message(b"drop"), Message(b"drop")])
    middleware = [{"custom": {"name": stamp, "config": {}}}]
    with Consumer.from_config({"memory": {"topic": topic}, "middlewares": middleware}) as con:
        assert con.poll(max=10, timeout_ms=50) == []
    with Consumer.from_config({"memory": {"topic": topic}}) as plain:
        assert plain.poll(max=10, timeout_ms=50) == []  # acked, not requeued


def test_a_hook_returning_the_wrong_count_is_an_error():
    name = unique("short").replace("-", "_")
    mq_bridge.register_middleware(name, lambda route, config: type("Short", (), {
        "on_send": lambda self, messages: []})())  # fmt: skip
    try:
        config = {"memory": {"topic": unique("t")}, "middlewares": [{"custom": {"name": name}}]}
        publisher = Publisher.from_config(config)
        with publisher, pytest.raises(EndpointError, match="returned 0 items for 1 messages"):
            publisher.send(b"x")
    finally:
        mq_bridge.unregister_middleware(name)
    with pytest.raises(ConfigError, match="no middleware named"):
        Publisher.from_config(config)


def test_public_names():
    for name in ["register_endpoint", "unregister_endpoint", "register_middleware",
                 "unregister_middleware"]:  # fmt: skip
        assert callable(getattr(mq_bridge, name)) and name in mq_bridge.__all__
