"""The `redis_streams` endpoint on the real Redis (tests/brokers.py: redis_url)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from mq_bridge import Consumer, Message, Publisher, Route
from mq_bridge.errors import ConfigError, EndpointUnavailableError
from tests.helpers import free_port
from tests.mq_bridge.helpers import open_input, read, unique

pytestmark = pytest.mark.redis


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(redis_url, socket_timeout=5) as connection:
        yield connection


@pytest.fixture
def stream(client: redis.Redis) -> Iterator[str]:
    """A stream name no one else uses; the key (with its groups) is deleted afterwards."""
    name = f"test-{uuid.uuid4().hex[:10]}"
    yield name
    client.delete(name)


def cfg(url: str, stream: str, **options: object) -> dict[str, dict[str, object]]:
    return {"redis_streams": {"url": url, "stream": stream, **options}}


def poll_n(consumer: Consumer, count: int, timeout: float = 10.0) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += consumer.poll(max=count - len(got), timeout_ms=100)
    return got


# --- config and connection errors ------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"url": "http://127.0.0.1:6379"}, "redis_streams.url"),
        ({"url": "redis://127.0.0.1:70000"}, "redis_streams.url"),
        ({"url": "redis://"}, "redis_streams.url"),
        ({"url": "redis://127.0.0.1", "block_ms": -1}, "redis_streams.block_ms"),
        ({"url": "redis://127.0.0.1", "maxlen": "big"}, "redis_streams.maxlen"),
        (
            {"url": "rediss://127.0.0.1", "tls": {"ca_file": "/nonexistent/ca.pem"}},
            "redis_streams.tls.ca_file",
        ),
    ],
)
def test_config_errors_name_the_field(options: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        Publisher.from_config({"redis_streams": options})


def test_null_options_mean_the_peers_defaults() -> None:
    from mq_bridge.endpoints.redis.options import RedisStreamsOptions

    options = RedisStreamsOptions.model_validate(
        {"url": "redis://h", "block_ms": None, "redelivery_timeout_ms": None, "approx_trim": None}
    )
    assert options.block_ms == 5000 and options.approx_trim is True
    assert options.redelivery_timeout == 60_000


def test_a_refused_connection_fails_start_promptly() -> None:
    unused_port = free_port()
    url = f"redis://127.0.0.1:{unused_port}"
    route = Route.from_config({"input": cfg(url, "s"), "output": {"null": None}})
    started = time.monotonic()
    with pytest.raises(EndpointUnavailableError, match="refused"):
        route.start()
    assert time.monotonic() - started < 30
    with pytest.raises(EndpointUnavailableError):
        Publisher.from_config(cfg(url, "s"))
    with pytest.raises(EndpointUnavailableError):
        Consumer.from_config(cfg(url, "s"))


# --- wire format, ids, metadata -----------------------------------------------------------


def test_entries_have_mq_bridges_fields_and_round_trip_id_and_metadata(
    redis_url: str, stream: str, client: redis.Redis
) -> None:
    sent = Message(b'{"a":1}', {"kind": "k", "mqb.src.kafka_offset": "7", "payload": "x"})
    with Publisher.from_config(cfg(redis_url, stream)) as publisher:
        publisher.send(sent)
        publisher.send_json({"b": 2}, {"kind": "j"}, "0190d3a6-7b1c-7e0a-9c51-5a1b2c3d4e5f")
    entries: list[tuple[bytes, dict[bytes, bytes]]] = client.xrange(stream)  # type: ignore[assignment]
    (_, fields), (_, second) = entries
    assert fields == {
        b"payload": b'{"a":1}',
        b"mqb_message_id": uuid.UUID(sent.assigned_id()).hex.encode(),
        b"kind": b"k",
    }  # mqb.src.* stripped; a metadata key named "payload" cannot be written
    assert second[b"mqb_message_id"] == b"0190d3a67b1c7e0a9c515a1b2c3d4e5f"
    with Consumer.from_config(cfg(redis_url, stream, read_from_start=True)) as consumer:
        first, json_message = poll_n(consumer, 2)
        consumer.commit()
    assert (first.id, first.payload, first.metadata) == (sent.id, sent.payload, {"kind": "k"})
    assert json_message.id == "0190d3a6-7b1c-7e0a-9c51-5a1b2c3d4e5f"
    assert json_message.json() == {"b": 2}


def test_foreign_entries_get_a_stable_id_and_their_fields_as_metadata(
    redis_url: str, stream: str, client: redis.Redis
) -> None:
    client.xadd(stream, {"data": "no payload field"})
    client.xadd(stream, {"payload": "p", "mqb_message_id": "12345", "other": "1"})
    config = cfg(redis_url, stream, read_from_start=True)
    with Consumer.from_config(config) as consumer:
        plain, numbered = poll_n(consumer, 2)
        consumer.nack()
        again = poll_n(consumer, 2)
        consumer.commit()
    assert (plain.payload, plain.metadata) == (b"", {"data": "no payload field"})
    assert (numbered.payload, numbered.metadata) == (b"p", {"other": "1"})
    assert numbered.id == str(uuid.UUID(int=12345))
    assert [m.id for m in again] == [plain.id, numbered.id]  # stable across redelivery


@pytest.mark.parametrize("enabled", [True, False])
def test_source_metadata_only_when_enabled(
    redis_url: str, stream: str, enabled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MQB_SOURCE_METADATA", "1" if enabled else "0")
    with Publisher.from_config(cfg(redis_url, stream)) as publisher:
        publisher.send(b"x", {"k": "v"})
    with Consumer.from_config(cfg(redis_url, stream, read_from_start=True)) as consumer:
        (message,) = poll_n(consumer, 1)
        consumer.commit()
    source = {k: v for k, v in message.metadata.items() if k.startswith("mqb.src.")}
    if not enabled:
        assert source == {}
        return
    assert source["mqb.src.redis_stream"] == stream
    assert source["mqb.src.redis_entry_id"] == source["mqb.src.redis_stream_id"]
    assert source["mqb.src.redis_entry_id"].count("-") == 1


# --- acks, nacks, redelivery --------------------------------------------------------------


def test_group_starts_at_the_end_unless_read_from_start(redis_url: str, stream: str) -> None:
    with Publisher.from_config(cfg(redis_url, stream)) as publisher:
        publisher.send(b"old")
        late = open_input(cfg(redis_url, stream, group="late"))
        early = open_input(cfg(redis_url, stream, group="early", read_from_start=True))
        publisher.send(b"new")
    assert [m.payload for m in late.receive(10, 2.0).messages] == [b"new"]
    assert [m.payload for m in early.receive(10, 2.0).messages] == [b"old", b"new"]
    late.close()
    early.close()


def test_nack_redelivers_at_once_and_acked_entries_leave_the_pending_list(
    redis_url: str, stream: str, client: redis.Redis
) -> None:
    with Publisher.from_config(cfg(redis_url, stream)) as publisher:
        source = open_input(cfg(redis_url, stream))
        publisher.send_batch([b"a", b"b", b"c"])
    first = source.receive(2, 2.0)
    second = source.receive(2, 2.0)
    source.nack(second)
    source.nack(first)
    again = source.receive(10, 2.0)
    assert [m.payload for m in again.messages] == [b"a", b"b", b"c"]
    assert [m.id for m in again.messages] == [m.id for m in first.messages + second.messages]
    assert source.status().pending == 3
    source.ack(again)
    assert source.status().pending == 0
    assert client.xpending(stream, f"mq-bridge-{stream}")["pending"] == 0
    source.close()


def test_a_closed_unacked_readers_entries_go_to_the_other_reader_at_once(
    redis_url: str, stream: str
) -> None:
    with Publisher.from_config(cfg(redis_url, stream)) as publisher:
        one, two = open_input(cfg(redis_url, stream)), open_input(cfg(redis_url, stream))
        publisher.send_batch([b"1", b"2", b"3"])
    taken = one.receive(10, 2.0)
    assert len(taken) == 3
    one.close()  # without an ack
    got = two.receive(10, 2.0)
    assert [m.payload for m in got.messages] == [b"1", b"2", b"3"]
    two.ack(got)
    two.close()


def test_a_dead_consumers_entries_are_taken_over_after_the_redelivery_timeout(
    redis_url: str, stream: str, client: redis.Redis
) -> None:
    group = f"mq-bridge-{stream}"
    survivor = open_input(cfg(redis_url, stream, redelivery_timeout_ms=300))
    client.xadd(stream, {"payload": "orphan"})
    # A consumer that reads and dies: the entry stays pending at it, never acked.
    client.xreadgroup(group, "dead-consumer", {stream: ">"}, count=10)
    assert not survivor.receive(10, 0.05)
    started = time.monotonic()
    batch = survivor.receive(10, 5.0)
    while not batch and time.monotonic() - started < 5:
        batch = survivor.receive(10, 0.5)
    assert [m.payload for m in batch.messages] == [b"orphan"]
    survivor.ack(batch)
    assert client.xpending(stream, group)["pending"] == 0
    survivor.close()


def test_closing_a_reader_with_nothing_pending_leaves_the_group(
    redis_url: str, stream: str, client: redis.Redis
) -> None:
    source = open_input(cfg(redis_url, stream))
    source.receive(1, 0.01)
    source.close()
    source.close()
    assert client.xinfo_consumers(stream, f"mq-bridge-{stream}") == []


def test_subscriber_mode_reads_new_entries_without_a_group(
    redis_url: str, stream: str, client: redis.Redis
) -> None:
    with Publisher.from_config(cfg(redis_url, stream)) as publisher:
        publisher.send(b"before")
        source = open_input(cfg(redis_url, stream, subscriber_mode=True))
        publisher.send_batch([b"x", b"y"])
    batch = source.receive(10, 2.0)
    assert [m.payload for m in batch.messages] == [b"x", b"y"]
    source.nack(batch)  # re-read from the batch
    assert [m.payload for m in source.receive(10, 2.0).messages] == [b"x", b"y"]
    assert source.status().pending is None
    assert client.xinfo_groups(stream) == []
    source.close()


@pytest.mark.parametrize(("approx", "most"), [(False, 5), (True, 200)])
def test_maxlen_trims_the_stream(
    redis_url: str, stream: str, client: redis.Redis, approx: bool, most: int
) -> None:
    with Publisher.from_config(cfg(redis_url, stream, maxlen=5, approx_trim=approx)) as publisher:
        publisher.send_batch([b"m"] * 300)
        for _ in range(20):
            publisher.send(b"one")
    assert 5 <= client.xlen(stream) <= most


def test_receive_honours_timeout_and_interrupt(redis_url: str, stream: str) -> None:
    import threading

    source = open_input(cfg(redis_url, stream))
    started = time.monotonic()
    assert not source.receive(10, 0.3)
    assert time.monotonic() - started >= 0.25
    result: list[object] = []
    reader = threading.Thread(target=lambda: result.append(source.receive(1, None)))
    reader.start()
    time.sleep(0.1)
    source.interrupt()
    reader.join(5.0)
    assert not reader.is_alive() and not result[0]
    source.close()


# --- the public API: Consumer loop, request/reply, routes ---------------------------------


def test_the_seeds_consumer_poll_commit_loop_drains_to_pending_zero(
    redis_url: str, stream: str
) -> None:
    with Publisher.from_config(cfg(redis_url, stream)) as publisher:
        publisher.send_batch([Message.from_json({"n": n}) for n in range(1200)])
    seen: list[int] = []
    with Consumer.from_config(cfg(redis_url, stream, read_from_start=True)) as consumer:
        assert consumer.status()["pending"] == 1200
        while not consumer.exhausted:
            batch = consumer.poll(max=500, timeout_ms=300)
            if not batch:
                break
            seen += [m.json()["n"] for m in batch]
            consumer.commit()
        assert consumer.status()["pending"] == 0
    assert seen == list(range(1200))


def test_request_reply_through_a_route_with_a_response_output(redis_url: str, stream: str) -> None:
    route = Route.from_config({"input": cfg(redis_url, stream), "output": {"response": {}}})
    route.with_handler(lambda message: message.with_payload(message.payload.upper()))
    with route, Publisher.from_config(cfg(redis_url, stream)) as publisher:
        reply = publisher.request(b"ping", {"correlation_id": "c-1"})
    assert (reply.payload, reply.metadata["correlation_id"]) == (b"PING", "c-1")


def test_a_route_forwards_between_streams(redis_url: str, stream: str, client: redis.Redis) -> None:
    sink = unique("out")
    route = Route.from_config(
        {"input": cfg(redis_url, stream), "output": {"memory": {"topic": sink}}}
    )
    with route, Publisher.from_config(cfg(redis_url, stream)) as publisher:
        for n in range(50):
            publisher.send_json({"n": n}, {"kind": "k"})
        got = read(sink, 50, 10.0)
    assert sorted(m.json()["n"] for m in got) == list(range(50))
    assert client.xpending(stream, f"mq-bridge-{stream}")["pending"] == 0
