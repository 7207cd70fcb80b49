"""The `mqtt` endpoint against the local Mosquitto (127.0.0.1:1883, MQTT 3.1.1 and 5)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from mq_bridge import Consumer, Message, Publisher, Route
from mq_bridge.endpoints.base import BuildContext
from mq_bridge.endpoints.kit.connections import ConnectionRegistry
from mq_bridge.endpoints.kit.replies import process_replies
from mq_bridge.errors import ConfigError, EndpointUnavailableError, RequestTimeoutError
from mq_bridge.runtime.factory import build_input, build_output, new_context
from tests.helpers import free_port

pytestmark = pytest.mark.mqtt

Config = dict[str, Any]


def drop_session(config: Config) -> None:
    """A clean start with the same client id discards a persistent session and its queue."""
    gone = {"mqtt": {**config["mqtt"], "clean_session": True}}
    source = build_input(gone, new_context("cleanup"))
    source.connect()
    source.close()


@pytest.fixture
def session(mqtt_address: str) -> Iterator[Any]:
    """Makes configs for unique topics and persistent sessions; drops them at teardown."""
    made: list[Config] = []

    def make(**options: Any) -> Config:
        name = f"test-{uuid.uuid4().hex[:10]}"
        base = {"url": f"tcp://{mqtt_address}", "topic": f"t/{name}", "client_id": name}
        config = {"mqtt": {**base, **options}}
        made.append(config)
        return config

    yield make
    for config in made:
        drop_session(config)


def subscribed(config: Config) -> Config:
    """Opens and closes the input once, so its persistent session queues from now on."""
    source = build_input(config, new_context("test"))
    source.connect()
    source.close()
    return config


def poll_all(consumer: Consumer, count: int, timeout: float = 10.0) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        batch = consumer.poll(max=500, timeout_ms=200)
        got += batch
        if batch:
            consumer.commit()
    return got


def receive_n(source: Any, count: int) -> list[Any]:
    """Batches until `count` messages arrived (bounded)."""
    batches: list[Any] = []
    deadline = time.monotonic() + 10
    while sum(len(b) for b in batches) < count and time.monotonic() < deadline:
        batch = source.receive(count - sum(len(b) for b in batches), 0.2)
        if batch:
            batches.append(batch)
    return batches


# -- configuration and connection ------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"url": "http://127.0.0.1:1883"}, "mqtt.url"),
        ({"url": "tcp://127.0.0.1:99999"}, "mqtt.url"),
        ({"qos": 3}, "mqtt.qos"),
        ({"protocol": "v4"}, "mqtt.protocol"),
        ({"protocol": "v3", "session_expiry_interval": 60}, "mqtt.session_expiry_interval"),
        ({"topic": "a/+/b"}, "mqtt.topic"),
    ],
)
def test_config_errors_name_the_field(options: Config, field: str) -> None:
    config = {"mqtt": {"url": "tcp://127.0.0.1:1883", "topic": "t", **options}}
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        Publisher.from_config(config)


def test_the_peer_spellings_of_the_protocol_are_accepted(session: Any) -> None:
    for spelling in ("v5", "V5", "5", "v3", "V3", "3.1.1"):
        with Publisher.from_config(session(protocol=spelling)) as publisher:
            publisher.send(b"x")


def test_a_refused_connection_fails_start_and_publisher() -> None:
    config = {"mqtt": {"url": f"tcp://127.0.0.1:{free_port()}", "topic": "t"}}
    with pytest.raises(EndpointUnavailableError):
        Publisher.from_config(config)
    route = Route.from_config({"input": config, "output": {"null": {}}})
    with pytest.raises(EndpointUnavailableError):
        route.start()


# -- the wire: payload, metadata, id ----------------------------------------------------------


@pytest.mark.parametrize("protocol", ["v5", "v3"])
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_payload_metadata_and_id_round_trip(session: Any, protocol: str, qos: int) -> None:
    config = session(protocol=protocol, qos=qos)
    sent = [
        Message(b'{"n": 1}', {"kind": "order", "unicode": "ünï"}),
        Message(b"\xff\x00binary", {"k": "v"}),
    ]
    # Online first: Mosquitto queues no QoS 0 message for an absent session.
    with Consumer.from_config(config) as consumer, Publisher.from_config(config) as publisher:
        publisher.send_batch(sent)
        got = poll_all(consumer, 2)
    assert [(m.id, m.payload, m.metadata) for m in got] == [
        (m.assigned_id(), m.payload, m.metadata) for m in sent
    ]


def test_v3_sends_a_message_without_metadata_as_its_bare_payload(session: Any) -> None:
    config = subscribed(session(protocol="v3"))
    with Publisher.from_config(config) as publisher:
        publisher.send(b"plain")
    raw = {"mqtt": {**config["mqtt"], "protocol": "v5"}}  # v5 reader: no envelope decoding
    with Consumer.from_config(raw) as consumer:
        assert [m.payload for m in poll_all(consumer, 1)] == [b"plain"]


@pytest.mark.parametrize("enabled", [True, False])
def test_source_metadata_only_when_enabled(session: Any, enabled: bool) -> None:
    config = session()
    context = BuildContext(route_name="test", source_metadata=enabled)
    source = build_input(config, context)
    source.connect()
    output = build_output(config, new_context("test"))
    output.connect()
    output.send_one(Message(b"x", {"mqb.src.mqtt_topic": "forged", "k": "v"}))
    batch = source.receive(10, 5.0)
    expected = {"k": "v", "mqb.src.mqtt_topic": config["mqtt"]["topic"]} if enabled else {"k": "v"}
    assert [m.metadata for m in batch.messages] == [expected]
    source.ack(batch)
    output.close()
    source.close()


# -- acknowledgement and sessions -------------------------------------------------------------


def test_nack_hands_the_batch_out_again_and_close_without_ack_redelivers(session: Any) -> None:
    config = session()
    source = build_input(config, new_context("test"))
    source.connect()
    with Publisher.from_config(config) as publisher:
        publisher.send_batch([b"a", b"b"])
    first = receive_n(source, 2)
    for batch in reversed(first):
        source.nack(batch)
    again = receive_n(source, 2)
    assert [m.payload for b in again for m in b.messages] == [b"a", b"b"]
    assert [m.id for b in again for m in b.messages] == [m.id for b in first for m in b.messages]
    source.close()  # never acked: the persistent session keeps them
    with Consumer.from_config(config) as consumer:
        assert [m.payload for m in poll_all(consumer, 2)] == [b"a", b"b"]
    with Consumer.from_config(config) as consumer:
        assert consumer.poll(max=10, timeout_ms=300) == []


def test_a_clean_session_gets_only_what_is_sent_while_it_is_there(session: Any) -> None:
    config = session(clean_session=True)
    subscribed(config)
    with Publisher.from_config(config) as publisher:
        publisher.send(b"missed")
        with Consumer.from_config(config) as consumer:
            publisher.send(b"seen")
            assert [m.payload for m in poll_all(consumer, 1)] == [b"seen"]


def test_delayed_ack_acknowledges_on_receipt(session: Any) -> None:
    config = subscribed(session(delayed_ack=True))
    with Publisher.from_config(config) as publisher:
        publisher.send(b"once")
    with Consumer.from_config(config) as consumer:
        assert [m.payload for m in consumer.poll(max=10, timeout_ms=5000)] == [b"once"]
    with Consumer.from_config(config) as consumer:  # not committed, yet gone
        assert consumer.poll(max=10, timeout_ms=300) == []


def test_seed_poll_commit_loop(session: Any) -> None:
    config = subscribed(session())
    with Publisher.from_config(config) as publisher:
        for n in range(250):
            publisher.send_json({"n": n}, {"kind": "order.created"})
    seen: list[int] = []
    with Consumer.from_config(config) as consumer:
        while not consumer.exhausted:
            batch = consumer.poll(max=500, timeout_ms=500)
            if not batch:
                break
            seen += [m.json()["n"] for m in batch]
            consumer.commit()
        assert consumer.status()["pending"] is None
    assert seen == list(range(250))


def test_a_backlog_larger_than_queue_capacity_never_hangs(session: Any) -> None:
    """mq-bridge's consumer hangs here; ours hands out at most the window, then drains."""
    config = subscribed(session(queue_capacity=10))
    with Publisher.from_config(config) as publisher:
        publisher.send_batch([str(n).encode() for n in range(300)])
    with Consumer.from_config(config) as consumer:
        first = consumer.poll(max=500, timeout_ms=5000)
        assert 1 <= len(first) <= 10
        started = time.monotonic()
        assert len(consumer.poll(max=500, timeout_ms=300)) <= 10 - len(first)
        assert time.monotonic() - started < 5  # bounded, not a performance threshold
        consumer.commit()
        rest = poll_all(consumer, 300 - len(first), timeout=30)
    assert [int(m.payload) for m in first + rest] == list(range(300))


# -- request/reply ----------------------------------------------------------------------------


def test_request_reply_through_a_route_with_a_response_output(session: Any) -> None:
    config = session(clean_session=True)
    route = Route.from_config({"input": config, "output": {"response": {}}})
    route.with_handler(lambda m: m.with_payload(m.payload.upper()))
    with route, Publisher.from_config(config) as publisher:
        reply = publisher.request(Message(b"ping", {"k": "v"}))
    assert reply.payload == b"PING"
    assert reply.get("k") == "v"


def test_a_request_without_a_responder_times_out(session: Any) -> None:
    config = session()
    output = build_output(config, new_context("test"))
    output.connect()
    with pytest.raises(RequestTimeoutError):
        output.request(Message(b"anyone?"), 0.3)
    output.close()


def test_outputs_share_one_connection_and_release_it(session: Any) -> None:
    config = session()
    context = new_context("test")
    context.connections = ConnectionRegistry()  # its own: other tests' leases live elsewhere
    first, second = build_output(config, context), build_output(config, context)
    first.connect()
    second.connect()
    assert first.status().details["client_id"] == second.status().details["client_id"]
    first.close()
    second.send_one(Message(b"still open"))
    second.close()
    second.close()
    assert len(context.connections) == 0


def test_interrupt_ends_a_waiting_receive(session: Any) -> None:
    source = build_input(session(), new_context("test"))
    source.connect()
    result: list[Any] = []
    reader = threading.Thread(target=lambda: result.append(source.receive(1, 30.0)))
    reader.start()
    time.sleep(0.05)
    source.interrupt()
    reader.join(10.0)
    assert not reader.is_alive() and not result[0]
    source.close()


def test_closing_an_input_forgets_the_forwarders_of_unanswered_requests(session: Any) -> None:
    """A request read but never answered must not leave its forwarder in the process-wide
    reply registry once the input is closed (it would hold the closed client forever)."""
    config = session(clean_session=True)
    context = new_context("test")
    source = build_input(config, context)
    source.connect()
    correlation_ids = [uuid.uuid4().hex for _ in range(3)]
    with Publisher.from_config(config) as publisher:
        for correlation_id in correlation_ids:
            publisher.send(
                Message(b"q", {"reply_to": "t/nobody", "correlation_id": correlation_id})
            )
    received = receive_n(source, len(correlation_ids))
    assert sum(len(batch) for batch in received) == len(correlation_ids)
    assert context.replies is process_replies()
    assert all(cid in process_replies() for cid in correlation_ids)
    source.close()
    assert not any(cid in process_replies() for cid in correlation_ids)
