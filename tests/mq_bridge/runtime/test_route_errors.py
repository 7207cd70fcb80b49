"""Handler and endpoint failures: retried without loss, dropped when hopeless, never hot."""

from __future__ import annotations

import threading
import time
from collections import Counter

from mq_bridge import Consumer, Message, NonRetryableError, Publisher, RetryableError, Route
from mq_bridge.errors import EndpointUnavailableError
from tests.helpers import wait_until
from tests.mq_bridge.helpers import read, unique
from tests.mq_bridge.runtime.scripted import Script


def memory_route(source: str, sink: str, **options: object) -> Route:
    return Route.from_config(
        {
            "input": {"memory": {"topic": source}},
            "output": {"memory": {"topic": sink}},
            "reconnect_interval_ms": 50,
            **options,
        }
    )


def test_a_retryable_error_is_retried_until_it_succeeds_and_delivered_once():
    source, sink = unique("in"), unique("out")
    attempts = Counter()

    def flaky(message: Message) -> Message:
        attempts[message.payload] += 1
        if message.payload == b"flaky" and attempts[message.payload] < 3:
            raise RetryableError("not yet")
        return message

    with memory_route(source, sink).with_handler(flaky):
        with Publisher.from_config({"memory": {"topic": source}}) as publisher:
            publisher.send_batch([b"ok-1", b"flaky", b"ok-2"])
        outs = read(sink, 3, timeout=10.0)
    assert sorted(m.payload for m in outs) == [b"flaky", b"ok-1", b"ok-2"]
    assert attempts == {b"ok-1": 1, b"flaky": 3, b"ok-2": 1}  # only the failed one retried


def test_retries_back_off_instead_of_looping_hot_and_stop_gives_the_message_back():
    source, sink = unique("in"), unique("out")
    attempts = []

    def always_retry(message: Message) -> None:
        attempts.append(time.monotonic())
        raise RetryableError("downstream is down")

    route = memory_route(source, sink).with_handler(always_retry)
    with route, Publisher.from_config({"memory": {"topic": source}}) as publisher:
        publisher.send(b"precious", {"k": "v"})
        assert wait_until(lambda: len(attempts) >= 4)
        time.sleep(0.3)
    # a hot loop would have made thousands of attempts in this time; backoff makes a few
    assert len(attempts) < 60
    with Consumer.from_config({"memory": {"topic": source}}) as consumer:
        (back,) = consumer.poll(max=10, timeout_ms=2000)
        consumer.commit()
    assert (back.payload, back.metadata) == (b"precious", {"k": "v"})


def test_non_retryable_and_unexpected_errors_drop_the_message_and_the_route_goes_on(caplog):
    source, sink = unique("in"), unique("out")

    def handler(message: Message) -> Message:
        if message.payload == b"bad":
            raise NonRetryableError("cannot ever work")
        if message.payload == b"bug":
            raise KeyError("oops")
        return message

    with memory_route(source, sink).with_handler(handler):
        with Publisher.from_config({"memory": {"topic": source}}) as publisher:
            publisher.send_batch([b"bad", b"bug", b"good"])
        outs = read(sink, 1, timeout=5.0)
    assert [m.payload for m in outs] == [b"good"]
    assert "cannot ever work" in caplog.text and "KeyError" in caplog.text
    with Consumer.from_config({"memory": {"topic": source}}) as consumer:
        assert consumer.poll(max=5, timeout_ms=50) == []  # dropped means acknowledged


def test_a_full_output_is_waited_out_without_losing_anything():
    source, sink = unique("in"), unique("out")
    config = {
        "input": {"memory": {"topic": source}},
        "output": {"memory": {"topic": sink, "capacity": 2, "send_timeout_ms": 20}},
        "reconnect_interval_ms": 50,
    }
    with Route.from_config(config):
        with Publisher.from_config({"memory": {"topic": source}}) as publisher:
            publisher.send_batch([f"m{i}".encode() for i in range(6)])
        time.sleep(0.2)  # the route hits the full output and backs off meanwhile
        outs = read(sink, 6, timeout=10.0)
    assert [m.payload for m in outs] == [f"m{i}".encode() for i in range(6)]


def test_a_transient_input_failure_reconnects_and_continues(scripted):
    script = Script(
        [Message(b"a"), Message(b"b")],
        receive_errors=[EndpointUnavailableError("connection reset")],
    )
    scripted["flaky"] = script
    sink = unique("out")
    config = {
        "input": {"scripted": {"name": "flaky"}},
        "output": {"memory": {"topic": sink}},
        "reconnect_interval_ms": 10,
    }
    route = Route.from_config(config)
    route.start()
    route.join(timeout=10.0)  # a bounded input: the route ends once it is exhausted
    assert not route.running
    assert script.connects == 2 and script.closes >= 1
    assert [m.payload for m in script.acked] == [b"a", b"b"]
    assert [m.payload for m in read(sink, 2, timeout=5.0)] == [b"a", b"b"]


def test_a_fatal_input_error_ends_the_route_and_join_raises_it(scripted):
    scripted["broken"] = Script([], bounded=False, receive_errors=[ValueError("corrupt")])
    route = Route.from_config({"input": {"scripted": {"name": "broken"}}})
    route.start()
    try:
        route.join()
    except ValueError as error:
        assert "corrupt" in str(error)
    else:
        raise AssertionError("join() should re-raise the error that ended the route")


def test_stop_interrupts_a_route_waiting_for_input():
    route = memory_route(unique("in"), unique("out"))
    route.start()
    stopper = threading.Timer(0.05, route.stop)
    stopper.start()
    route.join()
    assert not route.running
