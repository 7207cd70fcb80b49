"""Middleware end to end, through the public API: routes over memory topics."""

from __future__ import annotations

import threading

import pytest

from mq_bridge import Message, NonRetryableError, Publisher, RetryableError, Route
from mq_bridge.errors import ConfigError
from mq_bridge.middleware._sleep import WakeableSleep
from mq_bridge.middleware.metrics import metrics_snapshot
from tests.mq_bridge.helpers import read, unique


def route_config(source: str, sink: str, middlewares: list, **route: object) -> dict:
    return {
        "input": {"memory": {"topic": source}},
        "output": {"memory": {"topic": sink}, "middlewares": middlewares},
        **route,
    }


def test_a_handler_error_lands_in_the_dlq_with_error_route_and_attempts():
    source, sink, dead = unique("in"), unique("out"), unique("dead")
    document = {
        "routes": {
            "orders": route_config(
                source, sink, [{"dlq": {"endpoint": {"memory": {"topic": dead}}}}]
            )
        }
    }

    def handle(message: Message) -> Message:
        if message.json()["n"] == 1:
            raise NonRetryableError("unknown customer 7")
        return message

    with Route.from_config(document, "orders").with_handler(handle):
        publisher = Publisher.from_config({"memory": {"topic": source}})
        for n in range(3):
            publisher.send_json({"n": n})
        (letter,) = read(dead, 1)
        delivered = read(sink, 2)
    assert letter.json() == {"n": 1}
    assert letter.metadata["mqb.dlq.error"] == "unknown customer 7"
    assert letter.metadata["mqb.dlq.error_type"] == "NonRetryableError"
    assert letter.metadata["mqb.dlq.route"] == "orders"
    assert letter.metadata["mqb.dlq.attempts"] == "1"
    assert sorted(m.json()["n"] for m in delivered) == [0, 2]


def test_a_retryable_error_is_retried_n_times_then_dead_lettered():
    source, sink, dead = unique("in"), unique("out"), unique("dead")
    middlewares = [
        {"dlq": {"endpoint": {"memory": {"topic": dead}}}},
        {"retry": {"max_attempts": 4, "initial_interval_ms": 1, "max_interval_ms": 5}},
    ]
    calls: list[str] = []

    def handle(message: Message) -> None:
        calls.append(message.id)
        raise RetryableError("warehouse busy")

    with Route.from_config(route_config(source, sink, middlewares)).with_handler(handle):
        Publisher.from_config({"memory": {"topic": source}}).send(Message(b"x", id="order-9"))
        (letter,) = read(dead, 1)
    assert letter.id == Message(b"", id="order-9").id
    assert letter.metadata["mqb.dlq.attempts"] == "4"
    assert letter.metadata["mqb.dlq.error"] == "warehouse busy"
    assert len(calls) == 4


def test_retry_listed_before_dlq_is_refused_at_start():
    middlewares = [{"retry": {}}, {"dlq": {"endpoint": {"memory": {"topic": unique("dead")}}}}]
    route = Route.from_config(route_config(unique("in"), unique("out"), middlewares))
    with pytest.raises(ConfigError, match=r"\[dlq, retry\]"):
        route.start()


def test_random_panic_needs_allow_fault_injection():
    middlewares = [{"random_panic": {"mode": "nack", "trigger_on_message": 1}}]
    with pytest.raises(ConfigError, match="allow_fault_injection"):
        Route.from_config(route_config(unique("in"), unique("out"), middlewares)).start()


def test_an_injected_retriable_fault_is_retried_and_nothing_is_lost():
    source, sink, name = unique("in"), unique("out"), unique("panicky")
    middlewares = [
        {"retry": {"max_attempts": 3, "initial_interval_ms": 1}},
        {"metrics": {}},  # counts every attempt that reaches the fault injector
        {"random_panic": {"mode": "disconnect", "trigger_on_message": 2}},
    ]
    config = route_config(source, sink, middlewares, allow_fault_injection=True)
    with Route.from_config({"routes": {name: config}}, name).with_handler(lambda m: m):
        publisher = Publisher.from_config({"memory": {"topic": source}})
        for n in range(5):
            publisher.send_json({"n": n})
        delivered = read(sink, 5)
    assert sorted(m.json()["n"] for m in delivered) == [0, 1, 2, 3, 4]
    attempts = metrics_snapshot()[name]["output"][f"memory:{sink}"]
    assert attempts["failed"] >= 1  # the fault fired: the send holding message 2 failed ...
    assert attempts["messages"] == 5 + attempts["failed"]  # ... and only it was sent again


def test_deduplication_on_the_input_survives_a_route_restart(tmp_path):
    source, sink = unique("in"), unique("out")
    config = {
        "input": {
            "memory": {"topic": source},
            "middlewares": [
                {"deduplication": {"ttl_seconds": 600, "store": str(tmp_path / "d.db")}}
            ],
        },
        "output": {"memory": {"topic": sink}},
    }
    handled: list[bytes] = []

    def handle(message: Message) -> Message:
        handled.append(message.payload)
        return message

    publisher = Publisher.from_config({"memory": {"topic": source}})
    with Route.from_config(config).with_handler(handle):
        publisher.send(Message(b"first", id="order-1"))
        publisher.send(Message(b"again", id="order-1"))
        publisher.send(Message(b"other", id="order-2"))
        assert len(read(sink, 2)) == 2
    with Route.from_config(config).with_handler(handle):
        publisher.send(Message(b"after restart", id="order-1"))
        publisher.send(Message(b"new", id="order-3"))
        assert [m.payload for m in read(sink, 1)] == [b"new"]
    assert handled == [b"first", b"other", b"new"]


def test_metrics_are_readable_per_route_and_endpoint():
    source, sink = unique("in"), unique("out")
    config = {
        "routes": {
            unique("metered"): {
                "input": {"memory": {"topic": source}, "middlewares": [{"metrics": {}}]},
                "output": {"memory": {"topic": sink}, "middlewares": [{"metrics": {}}]},
            }
        }
    }
    name = next(iter(config["routes"]))
    with Route.from_config(config, name).with_handler(lambda m: m):
        publisher = Publisher.from_config({"memory": {"topic": source}})
        for n in range(10):
            publisher.send_json({"n": n})
        assert len(read(sink, 10)) == 10
    figures = metrics_snapshot()[name]
    assert figures["output"][f"memory:{sink}"]["messages"] == 10
    assert figures["input"][f"memory:{source}"]["acked"] == 10


def test_weak_join_on_a_route_input_hands_the_handler_one_joined_message():
    source, sink = unique("in"), unique("out")
    config = {
        "input": {
            "memory": {"topic": source},
            "middlewares": [
                {"weak_join": {"group_by": "order", "expected_count": 2, "timeout_ms": 60_000}}
            ],
        },
        "output": {"memory": {"topic": sink}},
    }
    with Route.from_config(config).with_handler(lambda m: m):
        publisher = Publisher.from_config({"memory": {"topic": source}})
        publisher.send_json({"part": "billing"}, {"order": "7"})
        publisher.send_json({"part": "shipping"}, {"order": "7"})
        (joined,) = read(sink, 1)
    assert joined.json() == [{"part": "billing"}, {"part": "shipping"}]
    assert joined.metadata["order"] == "7"


def test_buffer_joins_concurrent_publisher_sends():
    sink = unique("out")
    publisher = Publisher.from_config(
        {
            "memory": {"topic": sink},
            "middlewares": [{"buffer": {"max_messages": 8, "max_delay_ms": 20}}],
        }
    )
    senders = [threading.Thread(target=publisher.send_json, args=({"n": n},)) for n in range(8)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(timeout=60)
    assert sorted(m.json()["n"] for m in read(sink, 8)) == list(range(8))


def test_middlewares_from_a_yaml_document(monkeypatch):
    waits: list[float] = []
    real_sleep = WakeableSleep.sleep

    def counted(self: WakeableSleep, seconds: float) -> bool:
        waits.append(seconds)
        return real_sleep(self, seconds)

    monkeypatch.setattr(WakeableSleep, "sleep", counted)
    source, sink = unique("in"), unique("out")
    text = f"""
routes:
  paced:
    input:
      memory: {{topic: {source}}}
      middlewares:
        - limiter: {{messages_per_second: 10000}}
    output:
      memory: {{topic: {sink}}}
      middlewares:
        - delay: {{delay_ms: 1}}
"""
    with Route.from_str(text, "paced").with_handler(lambda m: m):
        Publisher.from_config({"memory": {"topic": source}}).send_json({"ok": True})
        assert [m.json() for m in read(sink, 1)] == [{"ok": True}]
    # Both were built from the YAML and paced the message: the limiter took its turn (on
    # time: no wait) and the delay waited its 1 ms.
    assert sorted(waits) == [0.0, 0.001]


def test_stopping_a_route_ends_a_long_retry_wait_and_keeps_the_message():
    source, sink = unique("in"), unique("out")
    retry = {
        "retry": {"max_attempts": 5, "initial_interval_ms": 600_000, "max_interval_ms": 600_000}
    }
    attempted = threading.Event()

    def handle(message: Message) -> Message:
        attempted.set()
        raise RetryableError("downstream busy")

    route = Route.from_config(route_config(source, sink, [retry])).with_handler(handle)
    route.start()
    Publisher.from_config({"memory": {"topic": source}}).send_json({"n": 1})
    assert attempted.wait(30)
    route.stop()
    route.join(timeout=60)  # the retry would wait ten minutes: only the stop can end it
    assert not route.running
    (kept,) = read(source, 1)  # nacked back to its topic, not lost
    assert kept.json() == {"n": 1}
