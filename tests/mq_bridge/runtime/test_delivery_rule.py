"""The delivery rule: a message is acknowledged at its source only after its output took it
or a decision let it go (src/mq_bridge/runtime/failures.py has the table).

An output that goes away (connect refused, then ClosedError on every send: the amqp/mqtt
path that lost messages before) holds the route; it resumes by itself. A handler bug is
redelivered with backoff where the source can redeliver, dropped (counted, logged with its
traceback) where it cannot or when the route says ``on_error: drop``.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest

from mq_bridge import Consumer, Message, Publisher, Route
from mq_bridge.errors import (
    ClosedError,
    ConfigError,
    EndpointUnavailableError,
    NonRetryableError,
    RetryableError,
)
from mq_bridge.middleware.retry import RetriesExhaustedError
from mq_bridge.observability.counters import route_counters
from mq_bridge.runtime.failures import FailurePolicy, Verdict
from tests.helpers import wait_until
from tests.mq_bridge.helpers import read, unique
from tests.mq_bridge.runtime.outage import Server
from tests.mq_bridge.runtime.scripted import Script

COUNT = 200


def named_route(prefix: str, config: dict[str, object]) -> Route:
    """A route with a name of its own, so its counters are its own."""
    name = unique(prefix)
    return Route.from_config({"routes": {name: config}}, name)


def outage_route(source: str, server: str, **options: object) -> Route:
    return named_route(
        "outage-route",
        {
            "input": {"memory": {"topic": source, "capacity": 0}},
            "output": {"outage": {"name": server}},
            "batch_size": 16,
            "reconnect_interval_ms": 100,
            **options,
        },
    )


def publish(topic: str, payloads: list[bytes]) -> None:
    with Publisher.from_config({"memory": {"topic": topic, "capacity": 0}}) as publisher:
        publisher.send_batch(payloads)


def test_an_output_that_goes_away_holds_the_route_and_nothing_is_lost(outage):
    server = outage["broker"] = Server()
    source = unique("in")
    payloads = [b"m%d" % i for i in range(COUNT)]
    route = outage_route(source, "broker").with_handler(lambda m: m)
    with route:
        publish(source, payloads[:50])
        assert wait_until(lambda: len(server.stored) == 50, 10)
        server.up = False  # the broker stops: refused connects, lost sends, ClosedError
        publish(source, payloads[50:])
        assert wait_until(lambda: server.refused >= 3, 10), "the route gave up reconnecting"
        status = route.status()
        assert status["healthy"] is False
        assert "outage" in status["error"] and "output" in status["error"]
        assert len(server.stored) == 50
        server.up = True
        assert wait_until(lambda: len(server.stored) >= COUNT, 10), "did not resume"
        assert wait_until(lambda: route.status()["healthy"], 5)
    assert server.payloads() == payloads  # every message, in order, once
    totals = route_counters(route.name).totals()
    assert totals["dropped"] == 0 and totals["acked"] == COUNT
    with Consumer.from_config({"memory": {"topic": source}}) as consumer:
        assert consumer.poll(max=5, timeout_ms=50) == []


def test_stopping_while_the_output_is_away_gives_the_batch_back(outage):
    server = outage["broker"] = Server(up=True)
    source = unique("in")
    route = outage_route(source, "broker")
    route.start()
    server.up = False
    publish(source, [b"kept-1", b"kept-2"])
    assert wait_until(lambda: server.refused >= 2, 10)
    route.stop()
    route.join(5)
    assert not route.running
    assert server.stored == []
    with Consumer.from_config({"memory": {"topic": source}}) as consumer:
        back = consumer.poll(max=5, timeout_ms=1000)
        consumer.commit()
    assert [m.payload for m in back] == [b"kept-1", b"kept-2"]


def test_an_output_down_at_start_is_waited_for_up_to_startup_timeout(outage):
    server = outage["broker"] = Server(up=False)
    source = unique("in")
    threading.Timer(0.5, lambda: setattr(server, "up", True)).start()
    route = outage_route(source, "broker", startup_timeout_ms=10_000)
    started = time.monotonic()
    with route:
        assert time.monotonic() - started >= 0.4
        publish(source, [b"after"])
        assert wait_until(lambda: server.payloads() == [b"after"], 5)


def test_an_output_still_down_at_startup_timeout_fails_start_in_bounded_time(outage):
    outage["broker"] = Server(up=False)
    route = outage_route(unique("in"), "broker", startup_timeout_ms=400)
    started = time.monotonic()
    with pytest.raises(EndpointUnavailableError, match=r"refused|did not connect"):
        route.start()
    assert time.monotonic() - started < 3


def test_a_connect_error_no_reconnect_cures_fails_start_at_once(outage):
    server = outage["broker"] = Server(connect_error=ConfigError("bad credentials", "url"))
    route = outage_route(unique("in"), "broker", startup_timeout_ms=10_000)
    started = time.monotonic()
    with pytest.raises(ConfigError, match="bad credentials"):
        route.start()
    assert time.monotonic() - started < 1 and server.connects == 1


def test_an_input_that_loses_its_connection_reconnects_until_it_is_back(scripted):
    # the amqp input's "not connected" ClosedError ended the whole process before
    script = Script(
        [Message(b"a"), Message(b"b")],
        receive_errors=[ClosedError("not connected"), ClosedError("not connected")],
    )
    scripted["flaky"] = script
    sink = unique("out")
    route = named_route(
        "reconnecting",
        {
            "input": {"scripted": {"name": "flaky"}},
            "output": {"memory": {"topic": sink}},
            "reconnect_interval_ms": 20,
        },
    )
    route.start()
    route.join(timeout=10.0)
    assert not route.running
    route.join()  # no error ended it
    assert [m.payload for m in script.acked] == [b"a", b"b"]
    assert script.connects >= 3
    assert route_counters(route.name).reconnects["input"] >= 2


def bug_route(source: str, sink: str, enable_nack: bool, **options: object) -> Route:
    return named_route(
        "bug-route",
        {
            "input": {"memory": {"topic": source, "enable_nack": enable_nack}},
            "output": {"memory": {"topic": sink}},
            "reconnect_interval_ms": 200,
            **options,
        },
    )


def fails_on_bug(message: Message) -> Message:
    """A handler with a bug for the message ``bug``."""
    if message.payload == b"bug":
        raise KeyError("oops")
    return message


def test_a_handler_bug_is_redelivered_with_backoff_and_named_in_status(caplog):
    source, sink = unique("in"), unique("out")
    calls: list[float] = []
    fixed = threading.Event()

    def handler(message: Message) -> Message:
        calls.append(time.monotonic())
        if not fixed.is_set():
            return {"total": message.json()["missing"]}  # KeyError: a bug
        return message

    caplog.set_level(logging.WARNING, "mq_bridge.route")
    route = bug_route(source, sink, enable_nack=True).with_handler(handler)
    with route:
        publish(source, [b'{"a": 1}'])
        time.sleep(1.5)
        status = route.status()
        assert status["healthy"] is False and "KeyError" in status["error"]
        # backoff: 10 ms doubling to 200 ms gives ~12 attempts in 1.5 s; a hot loop, thousands
        assert 3 <= len(calls) <= 30, len(calls)
        assert read(sink, 1, timeout=0.05) == []
        fixed.set()
        assert [m.payload for m in read(sink, 1, timeout=5)] == [b'{"a": 1}']
        assert wait_until(lambda: route.status()["healthy"], 5)
    assert route_counters(route.name).totals()["dropped"] == 0
    tracebacks = [r for r in caplog.records if r.exc_info and "KeyError" in r.getMessage()]
    assert len(tracebacks) == 1, "the traceback is logged, once per error type and interval"
    assert "Traceback" in caplog.text and "'missing'" in caplog.text


def test_a_handler_bug_on_a_source_that_cannot_redeliver_is_dropped_counted_and_logged(caplog):
    source, sink = unique("in"), unique("out")
    route = bug_route(source, sink, enable_nack=False).with_handler(fails_on_bug)
    with route:
        publish(source, [b"bug", b"good"])
        assert [m.payload for m in read(sink, 1, timeout=5)] == [b"good"]
    assert route_counters(route.name).totals()["dropped"] == 1
    assert "cannot redeliver" in caplog.text and "Traceback" in caplog.text


def test_on_error_drop_drops_a_handler_bug_even_where_the_source_could_redeliver(caplog):
    source, sink = unique("in"), unique("out")
    route = bug_route(source, sink, enable_nack=True, on_error="drop").with_handler(fails_on_bug)
    with route:
        publish(source, [b"bug", b"good"])
        assert [m.payload for m in read(sink, 1, timeout=5)] == [b"good"]
        time.sleep(0.1)
    assert route_counters(route.name).totals()["dropped"] == 1
    assert "on_error: drop" in caplog.text


def test_a_dead_letter_queue_takes_a_handler_bug_instead_of_redelivering_it():
    source, sink, dead = unique("in"), unique("out"), unique("dead")
    route = Route.from_config(
        {
            "input": {"memory": {"topic": source, "enable_nack": True}},
            "output": {
                "memory": {"topic": sink},
                "middlewares": [{"dlq": {"endpoint": {"memory": {"topic": dead}}}}],
            },
        }
    ).with_handler(lambda m: {}["missing"])
    with route:
        publish(source, [b"poison"])
        (letter,) = read(dead, 1, timeout=5)
    assert letter.payload == b"poison"
    assert letter.metadata["mqb.dlq.error_type"] == "KeyError"


def test_on_error_is_validated():
    with pytest.raises(ConfigError, match="on_error"):
        Route.from_config({"input": {"memory": {"topic": "x"}}, "on_error": "ignore"}).start()


@pytest.mark.parametrize(
    ("cause", "redelivers", "on_error", "verdict"),
    [
        (EndpointUnavailableError("away"), False, "drop", "hold"),
        (ClosedError("not connected"), False, "drop", "hold"),  # closed only to reconnect
        (OSError(28, "No space left on device"), False, "drop", "hold"),
        (ConnectionResetError("reset"), False, "drop", "hold"),
        (RetryableError("later"), False, "drop", "hold"),
        (RetriesExhaustedError(3, EndpointUnavailableError("away")), False, "drop", "hold"),
        (NonRetryableError("never"), True, "redeliver", "drop"),
        (RetriesExhaustedError(3, RetryableError("later")), True, "redeliver", "drop"),
        (KeyError("bug"), True, "redeliver", "hold"),
        (KeyError("bug"), False, "redeliver", "drop"),
        (KeyError("bug"), True, "drop", "drop"),
        (ValueError("refused by the broker"), True, "redeliver", "hold"),
    ],
)
def test_the_delivery_rule_table(cause, redelivers, on_error, verdict):
    policy = FailurePolicy(redelivers, on_error, threading.Event())
    assert policy.verdict(cause) is Verdict(verdict)


def test_a_closed_output_of_a_stopping_route_is_not_held():
    stopping = threading.Event()
    stopping.set()
    policy = FailurePolicy(False, "redeliver", stopping)
    assert policy.verdict(ClosedError("closed")) is Verdict.DROP


def healthy_gauge(route: str) -> float:
    from mq_bridge.observability.prometheus import BridgeCollector

    for family in BridgeCollector().collect():
        if family.name == "mq_bridge_route_healthy":
            for sample in family.samples:
                if sample.labels["route"] == route:
                    return float(sample.value)
    raise AssertionError(f"no mq_bridge_route_healthy sample for {route}")


def test_an_unhealthy_route_is_zero_in_the_healthy_gauge(outage):
    server = outage["broker"] = Server()
    source = unique("in")
    route = outage_route(source, "broker")
    with route:
        assert healthy_gauge(route.name) == 1.0
        server.up = False
        publish(source, [b"held"])
        assert wait_until(lambda: healthy_gauge(route.name) == 0.0, 10)
        server.up = True
        assert wait_until(lambda: healthy_gauge(route.name) == 1.0, 10)
    assert server.payloads() == [b"held"]


@pytest.mark.parametrize("concurrency", [1, 2])
def test_an_ack_that_cannot_reach_the_broker_does_not_end_the_route(scripted, concurrency):
    script = Script(
        [Message(b"a"), Message(b"b"), Message(b"c")],
        ack_errors=[EndpointUnavailableError("channel closed")],
    )
    scripted["acks"] = script
    sink = unique("out")
    route = named_route(
        "acks",
        {
            "input": {"scripted": {"name": "acks"}},
            "output": {"memory": {"topic": sink}},
            "batch_size": 1,
            "concurrency": concurrency,
        },
    )
    route.start()
    route.join(timeout=10.0)
    assert not route.running
    route.join()  # ended because the input is exhausted, not on the error
    assert sorted(m.payload for m in read(sink, 3, timeout=5)) == [b"a", b"b", b"c"]
    assert len(script.acked) == 2  # the first ack failed: a broker would redeliver it
