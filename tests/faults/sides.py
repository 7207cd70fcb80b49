"""Each broker as one side of a fault route: its endpoint configs, the producer's and the sink's.

A side answers four configs, for the two roles a broker plays in a case:

    the broker is the route's input     producer --publisher()--> BROKER --input()--> route
    the broker is the route's output    route --output()--> BROKER --sink()--> sink counter

and `prepare` makes what must exist before the first message (an MQTT persistent session, a
NATS durable consumer), `restart` restarts the broker under the running route, `cleanup`
deletes what the case created (queues, tables, streams) and leaves every shared server
running. The other side of every route is the embedded `twain` log (`TwainSide`), which keeps
taking (or handing out) messages while the broker is down.

Configs are plain endpoint blocks, as a user writes them (docs/endpoints/*.md and each
endpoint package's docstring); no middleware.
"""

from __future__ import annotations

import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

from tests.faults.harness import Sent, retrying
from tests.faults.servers import (
    PrivateMosquitto,
    PrivateNats,
    PrivateRedis,
    PrivateServer,
    PrivateTansu,
    SharedServer,
)

Config = dict[str, Any]

#: JetStream redelivers what a consumer held (delivered, unacknowledged) after its ack wait.
#: The endpoint keeps the ack wait of a durable consumer that exists; the suite creates its
#: consumers with a short one (an operator's choice) so a held batch comes back in seconds,
#: not the default 30 s.
NATS_ACK_WAIT = 3.0
#: Small JetStream limits (a stream's max_bytes is reserved from the server's storage).
NATS_LIMITS = {"stream_max_bytes": 16 << 20, "stream_max_messages": 200_000}
#: A Redis streams reader takes over entries a dead reader (a killed route) left pending
#: after this long; the default, 60 s, would outlast the case.
REDIS_REDELIVERY_MS = 3000
#: Tansu's last answered produce before it exits may be lost (see KafkaSide): a record the
#: route took from its source this long before Tansu's process ended may have been in it.
LAST_ANSWER_WINDOW = 1.0
#: Tansu's group join takes about session.timeout.ms / 2 (shared/BROKERS.md).
KAFKA_SESSION = [["session.timeout.ms", "6000"], ["heartbeat.interval.ms", "1000"]]


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


class Side:
    """One broker (or the twain log) as a route's input or output."""

    name = "side"
    #: How long a restart keeps it down, between its stop and its start.
    down_seconds = 3.0
    #: What restarts it (None: nothing, as for twain).
    server: PrivateServer | SharedServer | None = None

    def input(self) -> Config:
        raise NotImplementedError

    def output(self) -> Config:
        raise NotImplementedError

    def publisher(self) -> Config:
        """The producer's config: it writes where `input()` reads."""
        raise NotImplementedError

    def sink(self) -> Config:
        """The sink's config: it reads where `output()` writes."""
        raise NotImplementedError

    def start(self) -> None:
        if self.server is not None:
            self.server.start()

    def prepare(self, role: str) -> None:
        """Make what must exist before the first message, for the broker as `role`."""

    def restart(self, down_seconds: float) -> float:
        assert self.server is not None, f"{self.name} cannot be restarted"
        return self.server.restart(down_seconds)

    def lost_by_broker(self, role: str, missing: dict[int, Sent]) -> set[int]:
        """Of the numbers acknowledged at the source but never received, those the broker
        itself lost. None, for a broker that keeps what it acknowledged."""
        return set()

    def cleanup(self) -> None:
        if self.server is not None:
            self.server.close()

    def log_tail(self) -> str:
        return self.server.tail() if self.server is not None else ""


class TwainSide(Side):
    """The embedded log: a directory under the case's tmp_path, up the whole time."""

    name = "twain"

    def __init__(self, root: Path) -> None:
        self.root = str(root)

    def _topic(self, topic: str, **more: Any) -> Config:
        return {"twain": {"root": self.root, "topic": topic, "create": {"partitions": 1}, **more}}

    def input(self) -> Config:
        return self._topic("source", group="route")

    def output(self) -> Config:
        return self._topic("sink")

    def publisher(self) -> Config:
        return self._topic("source")

    def sink(self) -> Config:
        return self._topic("sink", group="sink")


class RabbitSide(Side):
    """The shared RabbitMQ: durable queues, persistent messages, publisher confirms."""

    name = "rabbitmq"
    #: RabbitMQ takes 3-5 s to accept connections again once started (and a few seconds to
    #: stop): that start alone is the ~3 s outage; no pause between stop and start.
    down_seconds = 0.0

    def __init__(self, url: str) -> None:
        self.url = url
        self.queues = {role: f"faults-{role}-{uuid.uuid4().hex[:8]}" for role in ("in", "out")}
        self.server: SharedServer = SharedServer("rabbitmq")

    def _queue(self, role: str) -> Config:
        return {"amqp": {"url": self.url, "queue": self.queues[role]}}

    def input(self) -> Config:
        return self._queue("in")

    def output(self) -> Config:
        return self._queue("out")

    def publisher(self) -> Config:
        return self._queue("in")

    def sink(self) -> Config:
        return self._queue("out")

    def cleanup(self) -> None:
        from tests.mq_bridge.endpoints.test_amqp import delete_queue

        try:
            self.server.close()  # running again before anything is deleted
        finally:
            for queue in self.queues.values():
                retrying(partial(delete_queue, self.url, queue), 30)


class PostgresSide(Side):
    """The shared PostgreSQL through `sqlx`: a table as a queue (rows deleted on ack)."""

    name = "postgres"

    def __init__(self, url: str) -> None:
        self.url = url
        self.tables = {role: unique(f"faults_{role}_") for role in ("in", "out")}
        self.server: SharedServer = SharedServer("postgres")

    def _table(self, role: str, **more: Any) -> Config:
        options = {"url": self.url, "table": self.tables[role], "auto_create_table": True}
        return {"sqlx": {**options, **more}}

    def input(self) -> Config:
        return self._table("in", delete_after_read=True)

    def output(self) -> Config:
        return self._table("out")

    def publisher(self) -> Config:
        return self._table("in")

    def sink(self) -> Config:
        return self._table("out", delete_after_read=True)

    def cleanup(self) -> None:
        from tests.mq_bridge.endpoints.test_sqlx import drop_table

        try:
            self.server.close()
        finally:
            for table in self.tables.values():
                retrying(partial(drop_table, self.url, table), 60)


class MosquittoSide(Side):
    """A private Mosquitto with persistence: QoS 1, persistent sessions (clean_session false)."""

    name = "mosquitto"

    def __init__(self, directory: Path) -> None:
        self.server: PrivateMosquitto = PrivateMosquitto(directory)
        prefix = unique("faults-")
        self.topics = {role: f"{prefix}/{role}" for role in ("in", "out")}
        self.clients = {"in": f"{prefix}-route", "out": f"{prefix}-sink"}

    def _endpoint(self, role: str, reader: bool) -> Config:
        options: Config = {"url": self.server.url, "topic": self.topics[role], "qos": 1}
        if reader:
            options["client_id"] = self.clients[role]
        return {"mqtt": options}

    def input(self) -> Config:
        return self._endpoint("in", reader=True)

    def output(self) -> Config:
        return self._endpoint("out", reader=False)

    def publisher(self) -> Config:
        return self._endpoint("in", reader=False)

    def sink(self) -> Config:
        return self._endpoint("out", reader=True)

    def prepare(self, role: str) -> None:
        """The reader's persistent session subscribes before the first message is published
        (MQTT keeps messages only for sessions that exist)."""
        from mq_bridge.runtime.factory import build_input, new_context

        config = self.input() if role == "input" else self.sink()
        reader = build_input(config, new_context("faults-session"))
        reader.connect()
        reader.close()


class NatsSide(Side):
    """A private nats-server with JetStream on disk: one stream per direction."""

    name = "nats"

    def __init__(self, directory: Path) -> None:
        self.server: PrivateNats = PrivateNats(directory)
        self.streams = {role: unique(f"faults_{role}_") for role in ("in", "out")}

    def _endpoint(self, role: str) -> Config:
        stream = self.streams[role]
        options = {"url": self.server.url, "subject": f"{stream}.m", "stream": stream}
        return {"nats": {**options, **NATS_LIMITS}}

    def input(self) -> Config:
        return self._endpoint("in")

    def output(self) -> Config:
        return self._endpoint("out")

    def publisher(self) -> Config:
        return self._endpoint("in")

    def sink(self) -> Config:
        return self._endpoint("out")

    def prepare(self, role: str) -> None:
        """The stream, and the reader's durable consumer with a short ack wait."""
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StreamConfig

        from mq_bridge.endpoints.nats.options import durable_name
        from tests.mq_bridge.endpoints.test_nats import run_nats

        stream = self.streams["in" if role == "input" else "out"]
        subject = f"{stream}.m"

        async def create(nc: Any) -> None:
            js = nc.jetstream(timeout=5)
            await js.add_stream(
                StreamConfig(
                    name=stream,
                    subjects=[f"{stream}.>"],
                    max_msgs=NATS_LIMITS["stream_max_messages"],
                    max_bytes=NATS_LIMITS["stream_max_bytes"],
                )
            )
            await js.add_consumer(
                stream,
                ConsumerConfig(
                    durable_name=durable_name(stream, subject),
                    filter_subject=subject,
                    deliver_policy=DeliverPolicy.ALL,
                    ack_policy=AckPolicy.EXPLICIT,
                    ack_wait=NATS_ACK_WAIT,
                    max_ack_pending=2000,
                ),
            )

        run_nats(self.server.url, create)


class RedisSide(Side):
    """A private Redis with an fsync'ed append-only file: streams and consumer groups."""

    name = "redis"

    def __init__(self, directory: Path) -> None:
        self.server: PrivateRedis = PrivateRedis(directory)
        self.streams = {role: unique(f"faults:{role}:") for role in ("in", "out")}

    def _stream(self, role: str, **more: Any) -> Config:
        return {"redis_streams": {"url": self.server.url, "stream": self.streams[role], **more}}

    def _reader(self, role: str, group: str) -> Config:
        return self._stream(
            role, group=group, read_from_start=True, redelivery_timeout_ms=REDIS_REDELIVERY_MS
        )

    def input(self) -> Config:
        return self._reader("in", "route")

    def output(self) -> Config:
        return self._stream("out")

    def publisher(self) -> Config:
        return self._stream("in")

    def sink(self) -> Config:
        return self._reader("out", "sink")


class KafkaSide(Side):
    """A private Tansu (Kafka protocol) on S3 storage, which keeps topics, records, groups
    and committed offsets across its restart, with one exception of its own.

    **Tansu 0.6 on S3 storage loses the last produce it acknowledged before it exits.**
    Measured here without mq-bridge (a confluent-kafka producer, idempotent,
    acks=all, flushing batches of 20 or single records through a SIGTERM restart of this
    Tansu): 3 of 5 restarts lost exactly the last request Tansu answered before its process
    ended -- all 20 records of that batch, or the one single record -- with a successful
    delivery report, and absent from the topic and from its S3 storage afterwards (a plain
    mq-bridge Publisher: 8 of 10 restarts lost one). SIGINT and SIGKILL lose the same way.
    No client can deliver a record its broker forgot, so these cases count only what Tansu
    kept, and report the rest as `broker_lost`, not `lost`:

    - the broker as the route's input: the producer is the test's; a number acknowledged to
      it that the topic does not hold after the case (`read_back`) was lost by Tansu;
    - the broker as the route's output: the route produced, and only Tansu knows what it
      answered; a number missing from the topic counts as Tansu's loss only if its source
      acknowledged it within `LAST_ANSWER_WINDOW` before Tansu's process ended (when a route
      hands a message to Tansu at once; the route does not hold messages while Tansu is up),
      else it stays `lost`.
    """

    name = "kafka"

    def __init__(self, directory: Path) -> None:
        self.server: PrivateTansu = PrivateTansu(directory)
        self.topics = {role: unique(f"faults-{role}-") for role in ("in", "out")}

    def _topic(self, role: str, **more: Any) -> Config:
        options = {"url": self.server.bootstrap, "topic": self.topics[role], "partitions": 1}
        return {"kafka": {**options, **more}}

    def _reader(self, role: str, group: str) -> Config:
        return self._topic(role, group_id=group, consumer_options=KAFKA_SESSION)

    def input(self) -> Config:
        return self._reader("in", f"{self.topics['in']}-route")

    def output(self) -> Config:
        return self._topic("out")

    def publisher(self) -> Config:
        return self._topic("in")

    def lost_by_broker(self, role: str, missing: dict[int, Sent]) -> set[int]:
        kept = self.read_back(self.topics["in" if role == "input" else "out"])
        gone = {n for n, sent in missing.items() if sent.id not in kept}
        if role == "input":
            return gone
        ended = self.server.down_at or 0.0
        return {n for n in gone if ended - LAST_ANSWER_WINDOW <= missing[n].acked_at <= ended}

    def read_back(self, topic: str, timeout: float = 20.0) -> set[str]:
        """The message ids of every record the topic holds now (partition 0, from offset 0;
        assigned, not subscribed: no group to join)."""
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = Consumer(
            {"bootstrap.servers": self.server.bootstrap, "group.id": f"{topic}-read-back",
             "enable.auto.commit": False, "enable.partition.eof": True}
        )  # fmt: skip
        consumer.assign([TopicPartition(topic, 0, 0)])
        ids: set[str] = set()
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                record = consumer.poll(0.5)
                if record is None:
                    continue
                error = record.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        break
                    continue
                identity = dict(record.headers() or []).get("mq_bridge.message_id")
                if isinstance(identity, bytes):
                    ids.add(identity.decode())
        finally:
            consumer.close()
        return ids

    def sink(self) -> Config:
        return self._reader("out", f"{self.topics['out']}-sink")
