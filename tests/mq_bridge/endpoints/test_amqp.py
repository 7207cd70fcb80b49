"""The `amqp` endpoint on the real RabbitMQ (127.0.0.1:5672): options, acks, ids, reply.

Every queue and exchange is uniquely named and deleted afterwards (`delete_queue`,
`delete_exchange`): RabbitMQ's durable queues outlive the test run.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from mq_bridge import Consumer, Message, Publisher, Route
from mq_bridge.endpoints.base import Batch, InputEndpoint
from mq_bridge.errors import ConfigError, EndpointUnavailableError
from mq_bridge.runtime.factory import build_input, new_context
from tests.helpers import free_port
from tests.mq_bridge.helpers import open_input, open_output

pytestmark = pytest.mark.amqp


def _admin(url: str, work: object) -> None:
    """Run ``work(channel)`` on a short-lived pika channel (bounded)."""
    import pika

    parameters = pika.URLParameters(url)
    parameters.socket_timeout = parameters.blocked_connection_timeout = 5
    parameters.stack_timeout = 10
    connection = pika.BlockingConnection(parameters)
    try:
        work(connection.channel())  # type: ignore[operator]
    finally:
        connection.close()


def delete_queue(url: str, queue: str) -> None:
    """Delete `queue` if it exists (test teardown)."""
    _admin(url, lambda channel: channel.queue_delete(queue))


def delete_exchange(url: str, exchange: str) -> None:
    _admin(url, lambda channel: channel.exchange_delete(exchange))


def publish_raw(url: str, queue: str, body: bytes, **properties: object) -> None:
    """Publish with plain pika, as a foreign producer would."""
    import pika

    _admin(
        url,
        lambda channel: channel.basic_publish("", queue, body, pika.BasicProperties(**properties)),
    )


@pytest.fixture
def queue(amqp_url: str) -> Iterator[str]:
    name = f"test-amqp-{uuid.uuid4().hex[:10]}"
    yield name
    delete_queue(amqp_url, name)


def config(url: str, queue: str, **options: object) -> dict[str, dict[str, object]]:
    return {"amqp": {"url": url, "queue": queue, **options}}


def receive_n(source: InputEndpoint, count: int, timeout: float = 10.0) -> list[Batch]:
    batches: list[Batch] = []
    deadline = time.monotonic() + timeout
    while sum(map(len, batches)) < count and time.monotonic() < deadline:
        batch = source.receive(count - sum(map(len, batches)), 0.2)
        if batch:
            batches.append(batch)
    return batches


# --- config errors --------------------------------------------------------------------


def test_a_wrong_scheme_names_the_url_field(queue: str) -> None:
    with pytest.raises(ConfigError, match=r"amqp\.url"):
        Publisher.from_config({"amqp": {"url": "http://127.0.0.1:5672/", "queue": queue}})


def test_an_input_without_a_queue_names_the_queue_field(amqp_url: str) -> None:
    with pytest.raises(ConfigError, match=r"amqp\.queue"):
        Consumer.from_config({"amqp": {"url": amqp_url}})


def test_an_unknown_option_and_a_bad_prefetch_are_config_errors(amqp_url: str) -> None:
    with pytest.raises(ConfigError, match="prefetch_count"):
        Consumer.from_config({"amqp": {"url": amqp_url, "queue": "q", "prefetch_count": -1}})
    with pytest.raises(ConfigError, match="queues"):
        Consumer.from_config({"amqp": {"url": amqp_url, "queues": "q"}})


def test_wrong_credentials_name_the_password_field(amqp_url: str, queue: str) -> None:
    with pytest.raises(ConfigError, match=r"amqp\.password"):
        Publisher.from_config(config(amqp_url, queue, password="wrong-password"))


def test_a_refused_connection_fails_start_quickly(queue: str) -> None:
    url = f"amqp://guest:guest@127.0.0.1:{free_port()}/"
    started = time.monotonic()
    with pytest.raises(EndpointUnavailableError) as caught:
        Publisher.from_config(config(url, queue))
    assert caught.value.retriable
    route = Route.from_config(
        {"input": config(url, queue), "output": {"null": {}}, "startup_timeout_ms": 15000}
    ).with_handler(lambda m: m)
    with pytest.raises(EndpointUnavailableError):
        route.start()
    assert time.monotonic() - started < 15.0


# --- acks, nacks, redelivery ----------------------------------------------------------


def test_unacked_messages_come_back_after_close_and_acked_ones_do_not(
    amqp_url: str, queue: str
) -> None:
    output = open_output(config(amqp_url, queue))
    output.send([Message(f"m{i}".encode()) for i in range(6)])
    source = open_input(config(amqp_url, queue))
    batches = receive_n(source, 6)
    assert [m.payload for b in batches for m in b.messages] == [f"m{i}".encode() for i in range(6)]
    # ack out of order: the last batch first, and only some of them
    first, *rest = [b for b in batches]
    for batch in rest:
        source.ack(batch)
    source.close()
    again = open_input(config(amqp_url, queue))
    back = [m.payload for b in receive_n(again, len(first)) for m in b.messages]
    assert back == [m.payload for m in first.messages]
    assert not again.receive(10, 0.3)
    again.close()
    output.close()


def test_out_of_order_acks_of_single_messages(amqp_url: str, queue: str) -> None:
    output = open_output(config(amqp_url, queue))
    output.send([Message(f"m{i}".encode()) for i in range(5)])
    source = open_input(config(amqp_url, queue))
    batches = [source.receive(1, 5.0) for _ in range(5)]
    for index in (3, 1, 4, 0, 2):
        source.ack(batches[index])
    assert source.status().pending == 0
    source.close()
    again = open_input(config(amqp_url, queue))
    assert not again.receive(10, 0.3)
    again.close()
    output.close()


def test_a_nack_redelivers_the_batch_and_what_was_buffered_behind_it(
    amqp_url: str, queue: str
) -> None:
    output = open_output(config(amqp_url, queue))
    output.send([Message(f"m{i}".encode()) for i in range(4)])
    source = open_input(config(amqp_url, queue))
    first = receive_n(source, 1)[0]
    source.nack(first)
    again = [m.payload for b in receive_n(source, 4) for m in b.messages]
    assert again == [b"m0", b"m1", b"m2", b"m3"]
    source.close()
    output.close()


def test_poll_returns_full_batches_from_a_backlog(amqp_url: str, queue: str) -> None:
    with Publisher.from_config(config(amqp_url, queue)) as publisher:
        publisher.send_batch([b"x"] * 1200)
    with Consumer.from_config(config(amqp_url, queue)) as consumer:
        sizes: list[int] = []
        while sum(sizes) < 1200:
            batch = consumer.poll(max=500, timeout_ms=5000)
            assert batch
            sizes.append(len(batch))
            consumer.commit()
        # Full batches (the peer returns ~7 of 500). A starved I/O thread can cut a gather
        # short on a loaded machine, so the test asks for one full batch, not every one.
        assert max(sizes) == 500
        assert consumer.status()["pending"] == 0


def test_status_pending_is_the_queue_depth(amqp_url: str, queue: str) -> None:
    with Publisher.from_config(config(amqp_url, queue)) as publisher:
        publisher.send_batch([b"x"] * 30)
    with Consumer.from_config(config(amqp_url, queue)) as consumer:
        assert consumer.status()["pending"] == 30
        assert len(consumer.poll(max=10, timeout_ms=5000)) == 10
        consumer.commit()
        assert consumer.status()["pending"] == 20


# --- the seed's Consumer loop ---------------------------------------------------------


def test_the_seed_consumer_poll_commit_loop(amqp_url: str, queue: str) -> None:
    with Publisher.from_config(config(amqp_url, queue)) as publisher:
        for i in range(50):
            publisher.send_json({"i": i}, {"kind": "order"})
    seen: list[int] = []
    with Consumer.from_config(config(amqp_url, queue)) as consumer:
        while not consumer.exhausted:
            batch = consumer.poll(max=20, timeout_ms=1000)
            if not batch:
                break
            seen += [m.json()["i"] for m in batch]
            consumer.commit()
        assert consumer.status()["pending"] == 0
    assert seen == list(range(50))


# --- ids, metadata, mqb.src.* ---------------------------------------------------------


def test_id_and_metadata_round_trip_as_amqp_properties(amqp_url: str, queue: str) -> None:
    import pika

    sent = Message(b"p", {"kind": "k", "correlation_id": "c-1", "reply_to": "r-q"})
    output = open_output(config(amqp_url, queue))
    output.send([sent])
    seen: list[tuple[object, ...]] = []
    _admin(amqp_url, lambda ch: seen.append(ch.basic_get(queue, auto_ack=False)))
    _, properties, _body = seen[0]
    assert isinstance(properties, pika.BasicProperties)
    assert properties.message_id == sent.id and properties.delivery_mode == 2
    assert properties.headers == {"kind": "k"}
    assert (properties.correlation_id, properties.reply_to) == ("c-1", "r-q")
    source = open_input(config(amqp_url, queue))
    got = receive_n(source, 1)[0].messages[0]
    assert (got.id, got.payload, got.metadata) == (sent.id, b"p", sent.metadata)
    source.close()
    output.close()


def test_foreign_messages_get_stable_ids_and_text_metadata(amqp_url: str, queue: str) -> None:
    open_output(config(amqp_url, queue)).close()  # declares the queue
    publish_raw(amqp_url, queue, b"a", message_id="not-a-uuid", headers={"n": 5, "b": True})
    publish_raw(amqp_url, queue, b"b")
    source = open_input(config(amqp_url, queue))
    first, second = [m for b in receive_n(source, 2) for m in b.messages]
    assert first.metadata == {"n": "5", "b": "true", "amqp_message_id": "not-a-uuid"}
    assert first.id == Message(b"", id="not-a-uuid").id  # the same id on every delivery
    assert second.id and second.metadata == {}
    source.close()


@pytest.mark.parametrize("enabled", [True, False])
def test_source_metadata_on_and_off(amqp_url: str, queue: str, enabled: bool) -> None:
    output = open_output(config(amqp_url, queue))
    output.send([Message(b"x", {"mqb.src.forged": "1", "k": "v"})])
    source = open_input(config(amqp_url, queue), source_metadata=enabled)
    got = receive_n(source, 1)[0].messages[0]
    expected = {"k": "v"}
    if enabled:
        expected |= {
            "mqb.src.amqp_exchange": "",
            "mqb.src.amqp_routing_key": queue,
            "mqb.src.amqp_delivery_tag": "1",
        }
    assert got.metadata == expected
    source.close()
    output.close()


def test_the_source_metadata_option_turns_it_on(amqp_url: str, queue: str) -> None:
    open_output(config(amqp_url, queue)).send([Message(b"x")])
    source = open_input(config(amqp_url, queue, source_metadata=True))
    got = receive_n(source, 1)[0].messages[0]
    assert got.metadata["mqb.src.amqp_routing_key"] == queue
    source.close()


# --- exchanges, subscribers, missing queues, delayed_ack -----------------------------


def test_subscribers_each_get_every_message_of_a_fanout_exchange(amqp_url: str, queue: str) -> None:
    exchange = f"test-amqp-x-{uuid.uuid4().hex[:8]}"
    try:
        sub = {"url": amqp_url, "exchange": exchange, "subscribe_mode": True}
        first, second = open_input({"amqp": sub}), open_input({"amqp": sub})
        worker = open_input(config(amqp_url, queue, exchange=exchange))
        output = open_output({"amqp": {"url": amqp_url, "exchange": exchange}})
        output.send([Message(b"a"), Message(b"b")])
        for source in (first, second, worker):
            assert [m.payload for b in receive_n(source, 2) for m in b.messages] == [b"a", b"b"]
            source.close()
        output.close()
    finally:
        delete_exchange(amqp_url, exchange)


def queue_exists(url: str, queue: str) -> bool:
    import pika

    found = []

    def probe(channel: object) -> None:
        try:
            channel.queue_declare(queue, passive=True)  # type: ignore[attr-defined]
            found.append(True)
        except pika.exceptions.ChannelClosedByBroker:
            pass  # 404: no such queue

    _admin(url, probe)
    return bool(found)


def test_a_publisher_of_a_subscribe_mode_config_reaches_every_subscriber(
    amqp_url: str, queue: str
) -> None:
    """The seed's broadcast mode: one config, three subscribers and a publisher built from it.

    Both peers publish to the fanout exchange (named after `queue` when there is no
    `exchange`) and declare no queue; a durable `queue` would only collect what nobody reads.
    """
    cfg = config(amqp_url, queue, subscribe_mode=True)
    try:
        subscribers = [open_input(cfg) for _ in range(3)]
        with Publisher.from_config(cfg) as publisher:
            publisher.send_batch([b"a", b"b"])
            publisher.send(b"c")
        for source in subscribers:
            got = [m.payload for b in receive_n(source, 3) for m in b.messages]
            assert got == [b"a", b"b", b"c"]
            source.close()
        assert not queue_exists(amqp_url, queue)
    finally:
        delete_exchange(amqp_url, queue)


def test_a_send_to_a_missing_queue_fails(amqp_url: str, queue: str) -> None:
    output = open_output(config(amqp_url, queue, no_declare_queue=True))
    with pytest.raises(Exception, match="unroutable"):
        output.send([Message(b"lost?")])
    output.close()


def test_delayed_ack_and_no_persistence(amqp_url: str, queue: str) -> None:
    cfg = config(amqp_url, queue, delayed_ack=True, no_persistence=True)
    output = open_output(cfg)
    output.send([Message(f"m{i}".encode()) for i in range(20)])
    source = open_input(cfg)
    assert len([m for b in receive_n(source, 20) for m in b.messages]) == 20
    source.close()
    output.close()


def test_receive_honours_interrupt_and_close_is_idempotent(amqp_url: str, queue: str) -> None:
    source = open_input(config(amqp_url, queue))
    result: list[Batch] = []
    reader = threading.Thread(target=lambda: result.append(source.receive(1, 30.0)))
    reader.start()
    time.sleep(0.1)
    source.interrupt()
    reader.join(5.0)
    assert not reader.is_alive() and not result[0]
    source.close()
    source.close()


# --- request/reply --------------------------------------------------------------------


def test_a_route_with_a_response_output_answers_amqp_requests(amqp_url: str, queue: str) -> None:
    """mq-bridge's responder shape: `output: response` answers to each request's reply_to."""
    responder = Route.from_config(
        {"input": config(amqp_url, queue), "output": {"response": {}}}
    ).with_handler(lambda m: m.with_payload(b"re:" + m.payload))
    with responder, Publisher.from_config(config(amqp_url, queue)) as publisher:
        reply = publisher.request(b"ping", {"k": "v"})
        assert reply.payload == b"re:ping" and reply.metadata["k"] == "v"
        replies = [publisher.request_json({"n": n}) for n in range(3)]
        assert [r.payload for r in replies] == [b're:{"n":%d}' % n for n in range(3)]


def test_request_reply_through_a_responder_route(amqp_url: str, queue: str) -> None:
    responder = Route.from_config(
        {"input": config(amqp_url, queue), "output": {"amqp": {"url": amqp_url}}}
    ).with_handler(lambda m: m.with_payload(b"re:" + m.payload))
    with responder, Publisher.from_config(config(amqp_url, queue)) as publisher:
        reply = publisher.request(b"ping", {"k": "v"})
        assert reply.payload == b"re:ping"
        assert reply.metadata["k"] == "v"
        replies = [publisher.request_json({"n": n}) for n in range(3)]
        assert [r.payload for r in replies] == [b're:{"n":%d}' % n for n in range(3)]


def test_an_input_closed_then_connected_again_reads_on(amqp_url: str, queue: str) -> None:
    """How a route reconnects a failed input: close(), then connect() (restart test: real)."""
    with Publisher.from_config(config(amqp_url, queue)) as publisher:
        publisher.send_batch([b"a", b"b"])
    source = build_input(config(amqp_url, queue), new_context("test"))
    source.connect()
    first = source.receive(1, 5.0)
    assert [m.payload for m in first.messages] == [b"a"]
    source.close()  # unacked: the broker requeues it
    source.connect()
    again: list[bytes] = []
    deadline = time.monotonic() + 10
    while len(again) < 2 and time.monotonic() < deadline:
        batch = source.receive(2, 0.5)
        again += [m.payload for m in batch.messages]
        if batch:
            source.ack(batch)
    source.close()
    assert sorted(again) == [b"a", b"b"]
