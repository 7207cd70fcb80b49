"""The `kafka` endpoint on the Kafka-protocol server (Tansu): options, connecting, the record
layout, tombstones, mqb.src.*, cumulative acks, nack, subscriber mode, lag, request/reply.

Every test uses its own topic and group and deletes the topic. Group members use the session
settings BROKERS.md gives for Tansu (its group join takes about session.timeout.ms / 2).
"""

from __future__ import annotations

import logging
import os
import ssl
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from mq_bridge import Consumer, Message, Publisher, Route
from mq_bridge.errors import ConfigError, EndpointUnavailableError
from mq_bridge.runtime.factory import build_input, build_output, new_context

pytestmark = pytest.mark.kafka

#: librdkafka's log lines go here, not to stderr.
QUIET = logging.getLogger("tests.kafka.librdkafka")
#: Tansu's group join takes about session.timeout.ms / 2 (shared/BROKERS.md).
SESSION = [["session.timeout.ms", "6000"], ["heartbeat.interval.ms", "1000"]]


# -- helpers (also used by cases.py and the other test_kafka* files) --------------------------


def kafka_config(
    bootstrap: str, topic: str, group_id: str | None = None, partitions: int = 1, **more: Any
) -> dict[str, Any]:
    """An endpoint config; with `group_id` a group member with Tansu-friendly sessions."""
    options: dict[str, Any] = {"url": bootstrap, "topic": topic, "partitions": partitions}
    if group_id is not None:
        options["group_id"] = group_id
    options["consumer_options"] = SESSION
    options.update(more)
    return {"kafka": options}


def delete_topic(bootstrap: str, topic: str, groups: Sequence[str] = ()) -> None:
    """Delete `topic` and its consumer groups: those named after it (``{topic}-g``...) and
    `groups` (bounded; what is gone already is fine). The server is shared: a group left
    behind stays in its memory."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": QUIET})
    try:
        admin.delete_topics([topic], operation_timeout=10, request_timeout=10)[topic].result(15)
    except Exception:
        pass
    try:
        listed = admin.list_consumer_groups(request_timeout=10).result(15)
        names = {g.group_id for g in listed.valid if g.group_id.startswith(topic)} | set(groups)
        futures = admin.delete_consumer_groups(sorted(names), request_timeout=10) if names else {}
        for future in futures.values():
            try:
                future.result(15)
            except Exception:
                pass  # a group with a live member, or gone already
    except Exception:
        pass


def raw_records(bootstrap: str, topic: str, count: int, timeout: float = 20.0) -> list[Any]:
    """`count` records read with plain confluent-kafka from partition starts (no group)."""
    from confluent_kafka import Consumer as RawConsumer
    from confluent_kafka import TopicPartition

    consumer = RawConsumer(
        {"bootstrap.servers": bootstrap, "group.id": f"raw-{uuid.uuid4()}", "logger": QUIET}
    )
    metadata = consumer.list_topics(topic, timeout=10)
    partitions = metadata.topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    records: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(records) < count and time.monotonic() < deadline:
        record = consumer.poll(0.2)
        if record is not None and record.error() is None:
            records.append(record)
    consumer.close()
    return records


def raw_produce(bootstrap: str, topic: str, records: list[tuple[Any, Any, Any]]) -> None:
    """Produce (key, value, headers) records with plain confluent-kafka, one at a time."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "logger": QUIET})
    for key, value, headers in records:
        producer.produce(topic, value, key, headers=headers)
        producer.flush(10)


def poll_n(consumer: Consumer, count: int, timeout: float = 20.0) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += consumer.poll(max=count - len(got), timeout_ms=200)
    return got


@pytest.fixture
def topic(kafka_bootstrap: str) -> Iterator[str]:
    name = f"test-kafka-{uuid.uuid4().hex[:10]}"
    try:
        yield name
    finally:
        delete_topic(kafka_bootstrap, name)


# -- options --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "where"),
    [
        ({"url": "http://broker:9092"}, "kafka.url"),
        ({"url": "user:secret@broker:9092"}, "kafka.url"),
        ({"url": "127.0.0.1:9092", "password": "secret"}, "kafka.password"),
        ({"url": "127.0.0.1:9092", "topic": "bad topic"}, "kafka.topic"),
        ({"url": "127.0.0.1:9092", "partitions": 0}, "kafka.partitions"),
        (
            {"url": "127.0.0.1:9092", "consumer_options": [["enable.auto.commit", "true"]]},
            "kafka.consumer_options",
        ),
        (
            {"url": "127.0.0.1:9092", "producer_options": [["bootstrap.servers", "x:1"]]},
            "kafka.producer_options",
        ),
    ],
)
def test_bad_options_name_the_option(options: dict[str, Any], where: str) -> None:
    with pytest.raises(ConfigError, match=where.replace(".", r"\.")):
        Publisher.from_config({"kafka": options})


def test_peer_config_shapes_are_accepted() -> None:
    """mq-bridge's schema allows nulls for defaults, and source topic lists."""
    from mq_bridge.config.declarations import parse_options
    from mq_bridge.endpoints.kafka.options import KafkaOptions

    options = parse_options(
        KafkaOptions,
        {
            "url": "kafka://user:pa%40ss@127.0.0.1:9092",
            "topic": ["a", "b"],
            "partitions": None,
            "shared": None,
            "producer_options": {"linger.ms": 0, "enable.idempotence": True},
        },
    )
    assert options.partitions == 6 and options.shared is True
    assert options.topics == ["a", "b"]
    assert options.sasl_credentials == ("user", "pa@ss")
    assert options.bootstrap_servers == "127.0.0.1:9092"
    assert options.producer_settings == (("linger.ms", "0"), ("enable.idempotence", "true"))


def test_sasl_and_tls_reach_librdkafka(tmp_path: Any) -> None:
    from mq_bridge.config.declarations import parse_options
    from mq_bridge.endpoints.kafka.client import base_settings
    from mq_bridge.endpoints.kafka.options import KafkaOptions

    ca_file = ssl.get_default_verify_paths().cafile
    if not ca_file or not os.path.exists(ca_file):
        pytest.skip("no system CA bundle to stand in for a CA file")
    options = parse_options(
        KafkaOptions,
        {
            "url": "b1:9093,b2:9093",
            "username": "app",
            "password": "secret",
            "tls": {"required": True, "ca_file": ca_file, "accept_invalid_certs": True},
        },
    )
    settings = base_settings(options)
    assert settings["bootstrap.servers"] == "b1:9093,b2:9093"
    assert settings["security.protocol"] == "SASL_SSL"
    assert (settings["sasl.username"], settings["sasl.password"]) == ("app", "secret")
    assert settings["ssl.ca.location"] == ca_file
    assert settings["enable.ssl.certificate.verification"] == "false"
    plain = parse_options(KafkaOptions, {"url": "ssl://b1:9093"})
    assert base_settings(plain)["security.protocol"] == "SSL"
    missing = parse_options(
        KafkaOptions, {"url": "b1:9093", "tls": {"required": True, "ca_file": str(tmp_path / "x")}}
    )
    with pytest.raises(ConfigError, match=r"kafka\.tls\.ca_file"):
        base_settings(missing)


def test_an_unknown_librdkafka_setting_fails_connect_naming_the_option(
    kafka_bootstrap: str, topic: str
) -> None:
    config = kafka_config(kafka_bootstrap, topic, producer_options=[["no.such.setting", "1"]])
    with pytest.raises(ConfigError, match=r"kafka\.producer_options"):
        Publisher.from_config(config)


def test_an_output_takes_one_topic(kafka_bootstrap: str) -> None:
    with pytest.raises(ConfigError, match=r"kafka\.topic"):
        Publisher.from_config({"kafka": {"url": kafka_bootstrap, "topic": ["a", "b"]}})


@pytest.mark.slow
def test_no_broker_fails_start_within_a_bounded_time() -> None:
    started = time.monotonic()
    with pytest.raises(EndpointUnavailableError, match="cannot reach"):
        Publisher.from_config({"kafka": {"url": "127.0.0.1:1", "topic": "nowhere"}})
    with pytest.raises(EndpointUnavailableError):
        Consumer.from_config({"kafka": {"url": "127.0.0.1:1", "topic": "nowhere", "group_id": "g"}})
    assert time.monotonic() - started < 60


# -- the record layout ------------------------------------------------------------------------


def test_records_carry_the_id_as_key_and_header_and_metadata_as_headers(
    kafka_bootstrap: str, topic: str
) -> None:
    message = Message(b"payload", {"kind": "order", "mqb.src.kafka_offset": "forged"})
    keyed = Message(b"keyed", {"customer": "c-42"})
    with Publisher.from_config(kafka_config(kafka_bootstrap, topic)) as publisher:
        publisher.send(message)
    keyed_config = kafka_config(kafka_bootstrap, topic, partition_key="customer")
    with Publisher.from_config(keyed_config) as publisher:
        publisher.send(keyed)
    first, second = raw_records(kafka_bootstrap, topic, 2)
    assert first.key() == uuid.UUID(message.id).bytes
    assert first.value() == b"payload"
    assert first.headers() == [
        ("kind", b"order"),
        ("mq_bridge.message_id", uuid.UUID(message.id).hex.encode()),
    ]
    assert second.key() == b"c-42"


def test_foreign_records_get_stable_ids_and_tombstones_are_marked(
    kafka_bootstrap: str, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MQB_SOURCE_METADATA", "1")
    Publisher.from_config(kafka_config(kafka_bootstrap, topic)).close()  # one partition
    raw_produce(
        kafka_bootstrap,
        topic,
        [(b"k1", b"plain", [("h", b"v")]), (b"k1", None, None)],
    )
    config = kafka_config(kafka_bootstrap, topic, group_id=f"{topic}-g")
    with Consumer.from_config(config) as consumer:
        first = poll_n(consumer, 2)
        consumer.nack()
        again = poll_n(consumer, 2)
    assert [m.payload for m in first] == [b"plain", b""]
    assert first[0].metadata == {
        "h": "v",
        "mqb.src.kafka_topic": topic,
        "mqb.src.kafka_partition": "0",
        "mqb.src.kafka_offset": "0",
    }
    assert first[1].get("mqb.kafka.tombstone") == "true"
    assert [m.id for m in again] == [m.id for m in first]  # ids from the position: stable
    # A tombstone read back and sent on stays a tombstone, with its key.
    with Publisher.from_config(kafka_config(kafka_bootstrap, topic, partition_key="k")) as out:
        out.send(Message(b"", {"mqb.kafka.tombstone": "true", "k": "k1"}))
    records = raw_records(kafka_bootstrap, topic, 3)
    assert records[2].value() is None and records[2].key() == b"k1"


def test_records_that_only_look_like_ours_are_read_by_the_general_rules(
    kafka_bootstrap: str, topic: str
) -> None:
    """The reader's fast path (our layout: the id header last, 32 hex digits) must give
    way to the general rules for anything else, including an id header without a value."""
    from mq_bridge.endpoints.kit.wire import position_id

    Publisher.from_config(kafka_config(kafka_bootstrap, topic)).close()  # one partition
    known = uuid.uuid4()
    raw_produce(
        kafka_bootstrap,
        topic,
        [
            (b"k", b"null id", [("mq_bridge.message_id", None)]),
            (b"k", b"not hex", [("h", b"v"), ("mq_bridge.message_id", b"zz" * 16)]),
            (b"k", b"dashed", [("mq_bridge.message_id", str(known).encode())]),
            (b"k", b"upper", [("h", b"v"), ("mq_bridge.message_id", known.hex.upper().encode())]),
        ],
    )
    config = kafka_config(kafka_bootstrap, topic, group_id=f"{topic}-g")
    with Consumer.from_config(config) as consumer:
        messages = poll_n(consumer, 4)
        consumer.commit()
    assert [m.payload for m in messages] == [b"null id", b"not hex", b"dashed", b"upper"]
    assert [m.id for m in messages] == [
        str(uuid.UUID(int=position_id("kafka", topic, 0, 0))),
        str(uuid.UUID(int=position_id("kafka", topic, 0, 1))),
        str(known),
        str(known),
    ]
    assert [m.metadata for m in messages] == [{}, {"h": "v"}, {}, {"h": "v"}]


def test_source_metadata_option(kafka_bootstrap: str, topic: str) -> None:
    with Publisher.from_config(kafka_config(kafka_bootstrap, topic)) as publisher:
        publisher.send_json({"n": 1}, {"kind": "k"})
    config = kafka_config(kafka_bootstrap, topic, group_id=f"{topic}-g", source_metadata=True)
    with Consumer.from_config(config) as consumer:
        [message] = poll_n(consumer, 1)
        consumer.commit()
    assert message.metadata == {
        "kind": "k",
        "mqb.src.kafka_topic": topic,
        "mqb.src.kafka_partition": "0",
        "mqb.src.kafka_offset": "0",
    }


# -- acknowledging ----------------------------------------------------------------------------


def test_acks_are_cumulative_so_out_of_order_acks_raise(kafka_bootstrap: str, topic: str) -> None:
    with Publisher.from_config(kafka_config(kafka_bootstrap, topic)) as publisher:
        for n in range(4):
            publisher.send_json({"n": n})
    config = kafka_config(kafka_bootstrap, topic, group_id=f"{topic}-g")
    with Consumer.from_config(config) as consumer:
        first, first_token = consumer.poll_batch(max=2, timeout_ms=15_000)
        second, second_token = consumer.poll_batch(max=2, timeout_ms=5_000)
        assert first_token is not None and second_token is not None
        assert [m.json()["n"] for m in first + second] == [0, 1, 2, 3]
        with pytest.raises(ValueError, match="ack the oldest batch first"):
            consumer.ack(second_token)
        consumer.ack(first_token)
    # The first batch was committed, the second not: a new member starts at n=2.
    with Consumer.from_config(config) as consumer:
        assert [m.json()["n"] for m in poll_n(consumer, 2)] == [2, 3]
        consumer.commit()


@pytest.mark.parametrize("interval", [True, False], ids=["interval-commits", "commit-per-ack"])
def test_acks_are_committed_without_another_read(
    kafka_bootstrap: str, topic: str, interval: bool
) -> None:
    """A member that acks and then neither reads nor closes still gets its ack committed:
    librdkafka's interval commit sends the offsets the ack stored (by default), or the ack
    sends its own commit (``enable.auto.commit=false``)."""
    from confluent_kafka import Consumer as RawConsumer
    from confluent_kafka import TopicPartition

    with Publisher.from_config(kafka_config(kafka_bootstrap, topic)) as publisher:
        for n in range(5):
            publisher.send_json({"n": n})
    group = f"{topic}-g"
    more = {} if interval else {"consumer_options": [*SESSION, ["enable.auto.commit", "false"]]}
    config = kafka_config(kafka_bootstrap, topic, group_id=group, **more)
    committed = None
    with Consumer.from_config(config) as consumer:
        got = poll_n(consumer, 5)
        consumer.commit()
        assert consumer._input._commits.interval_commits is interval  # type: ignore[attr-defined]
        # The group's committed offset, read by another client (no join, no commit).
        reader = RawConsumer(
            {"bootstrap.servers": kafka_bootstrap, "group.id": group, "logger": QUIET}
        )
        try:
            deadline = time.monotonic() + 15
            while committed != 5 and time.monotonic() < deadline:
                time.sleep(0.1)
                [position] = reader.committed([TopicPartition(topic, 0)], timeout=10)
                committed = position.offset
        finally:
            reader.close()
    assert len(got) == 5
    assert committed == 5


def test_pending_is_the_groups_lag(kafka_bootstrap: str, topic: str) -> None:
    # One record per produce request: Tansu's end offsets are right only then (BROKERS.md).
    with Publisher.from_config(kafka_config(kafka_bootstrap, topic)) as publisher:
        for n in range(5):
            publisher.send_json({"n": n})
    config = kafka_config(kafka_bootstrap, topic, group_id=f"{topic}-g")
    with Consumer.from_config(config) as consumer:
        assert consumer.status()["pending"] == 5
        got = poll_n(consumer, 3)
        assert consumer.status()["pending"] == 5  # handed out, not committed
        consumer.commit()
        assert consumer.status()["pending"] == 5 - len(got)
        poll_n(consumer, 5 - len(got))
        consumer.commit()
        assert consumer.status()["pending"] == 0


def test_subscriber_mode_reads_only_what_is_published_after_it_connected(
    kafka_bootstrap: str, topic: str
) -> None:
    with Publisher.from_config(kafka_config(kafka_bootstrap, topic, partitions=3)) as publisher:
        publisher.send_json({"phase": "before"})
        with Consumer.from_config(kafka_config(kafka_bootstrap, topic)) as consumer:
            publisher.send_batch([Message.from_json({"phase": "after", "n": n}) for n in range(5)])
            got = poll_n(consumer, 5)
            assert sorted(m.json()["n"] for m in got) == [0, 1, 2, 3, 4]
            assert consumer.status()["details"]["mode"] == "subscriber"
            consumer.commit()


def test_delayed_ack_sends_are_delivered_by_close(kafka_bootstrap: str, topic: str) -> None:
    config = kafka_config(kafka_bootstrap, topic, delayed_ack=True)
    with Publisher.from_config(config) as publisher:
        for n in range(20):
            publisher.send_json({"n": n})
    assert len(raw_records(kafka_bootstrap, topic, 20)) == 20


def test_shared_outputs_use_one_producer(kafka_bootstrap: str, topic: str) -> None:
    context = new_context("shared")
    first = build_output(kafka_config(kafka_bootstrap, topic), context)
    second = build_output(kafka_config(kafka_bootstrap, f"{topic}-2"), context)
    alone = build_output(kafka_config(kafka_bootstrap, topic, shared=False), context)
    for output in (first, second, alone):
        output.connect()
    try:
        producer = first._link().producer  # type: ignore[attr-defined]
        assert second._link().producer is producer  # type: ignore[attr-defined]
        assert alone._link().producer is not producer  # type: ignore[attr-defined]
    finally:
        for output in (first, second, alone):
            output.close()
        delete_topic(kafka_bootstrap, f"{topic}-2")


def test_an_input_reads_a_topic_list(kafka_bootstrap: str, topic: str) -> None:
    other = f"{topic}-b"
    try:
        for name in (topic, other):
            with Publisher.from_config(kafka_config(kafka_bootstrap, name)) as publisher:
                publisher.send_json({"topic": name})
        source = build_input(
            kafka_config(kafka_bootstrap, f"{topic},{other}", group_id=f"{topic}-g"),
            new_context("list"),
        )
        source.connect()
        got: list[Message] = []
        deadline = time.monotonic() + 20
        while len(got) < 2 and time.monotonic() < deadline:
            batch = source.receive(10, 0.2)
            got += batch.messages
            if batch:
                source.ack(batch)
        source.close()
        assert sorted(m.json()["topic"] for m in got) == sorted([topic, other])
    finally:
        delete_topic(kafka_bootstrap, other)


def test_an_input_reads_topics_matching_a_regex(kafka_bootstrap: str, topic: str) -> None:
    with Publisher.from_config(kafka_config(kafka_bootstrap, topic)) as publisher:
        publisher.send_json({"n": 1})
    config = kafka_config(kafka_bootstrap, f"^{topic}$", group_id=f"{topic}-g")
    with Consumer.from_config(config) as consumer:
        assert [m.json() for m in poll_n(consumer, 1)] == [{"n": 1}]
        consumer.commit()


# -- request/reply ----------------------------------------------------------------------------


def test_request_reply_through_reply_to(kafka_bootstrap: str, topic: str) -> None:
    responder = Route.from_config(
        {
            "input": kafka_config(kafka_bootstrap, topic, group_id=f"{topic}-g"),
            "output": {"response": {}},
        }
    ).with_handler(lambda message: message.with_json({"echo": message.json()["q"]}))
    with responder, Publisher.from_config(kafka_config(kafka_bootstrap, topic)) as publisher:
        reply = publisher.request_json({"q": "ping"})
    assert reply.json() == {"echo": "ping"}


# -- rebalancing ------------------------------------------------------------------------------


def rebalance_after_acking(bootstrap: str, topic: str) -> tuple[list[int], list[int]]:
    """Member A reads and acks 20 records; member B joins. Both poll until the group has split
    the 4 partitions, then 10 more records are published. Returns (the records read again
    while the group rebalanced, the records read after it)."""
    with Publisher.from_config(kafka_config(bootstrap, topic, partitions=4)) as publisher:
        for n in range(20):
            publisher.send_json({"n": n})
        config = kafka_config(bootstrap, topic, group_id=f"{topic}-g", partitions=4)
        members = [build_input(config, new_context(f"member-{n}")) for n in range(2)]
        members[0].connect()
        try:
            seen: list[int] = []
            deadline = time.monotonic() + 30
            while len(seen) < 20 and time.monotonic() < deadline:
                batch = members[0].receive(50, 0.2)
                seen += [m.json()["n"] for m in batch.messages]
                members[0].ack(batch)
            assert sorted(seen) == list(range(20))
            members[1].connect()
            again = poll_members(members, lambda: all(owned_by(m) for m in members), 40)
            owned = [owned_by(m) for m in members]
            assert all(owned) and not owned[0] & owned[1], f"no split: {owned}"
            for n in range(20, 30):
                publisher.send_json({"n": n})
            after: list[int] = []
            after += poll_members(members, lambda: len(after) >= 10, 20, into=after)
        finally:
            for member in members:
                member.close()
    return again, after


def owned_by(member: Any) -> set[tuple[str, int]]:
    """The partitions a kafka input owns now (read without committing, unlike status())."""
    return set(member._commits.owned())


def poll_members(
    members: list[Any], done: Any, timeout: float, into: list[int] | None = None
) -> list[int]:
    """Receive and ack on every member in turn until `done()` (or `timeout`); what came."""
    got: list[int] = [] if into is None else into
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        for member in members:
            batch = member.receive(50, 0.1)
            got += [m.json()["n"] for m in batch.messages]
            member.ack(batch)
    return [] if into is not None else got


def test_a_member_joining_takes_partitions_without_redelivering_what_was_acked(
    kafka_bootstrap: str, topic: str
) -> None:
    again, after = rebalance_after_acking(kafka_bootstrap, topic)
    assert again == []
    assert sorted(after) == list(range(20, 30))


def test_partitions_that_move_get_what_was_acked_committed_first(
    kafka_bootstrap: str, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The acks' commits never land here (nothing is stored for librdkafka's interval commit
    and no asynchronous commit is sent, as if the group rebalanced before they went out):
    only the revoke callback's commit keeps B from reading again what A acked."""
    from mq_bridge.endpoints.kafka.commits import PartitionCommits

    commit = PartitionCommits.commit

    def only_waited(self: Any, consumer: Any, only: Any = None, wait: bool = True) -> None:
        if wait:
            commit(self, consumer, only, wait)

    monkeypatch.setattr(PartitionCommits, "commit", only_waited)
    monkeypatch.setattr(PartitionCommits, "_store", lambda self, consumer, offsets: True)
    again, after = rebalance_after_acking(kafka_bootstrap, topic)
    assert again == []
    assert sorted(after) == list(range(20, 30))
