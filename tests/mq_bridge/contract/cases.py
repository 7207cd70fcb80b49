"""The endpoints the contract suite runs on, one factory each.

To add an endpoint, write a factory that returns a `ContractCase` for a fresh, private
place (a unique topic, a file under `tmp_path`, ...) and add it to `CASES`:

    def file_case(tmp_path: Path) -> ContractCase:
        path = str(tmp_path / "log.jsonl")
        return ContractCase({"file": {"path": path}}, {"file": {"path": path}}, bounded=True)

Markers (e.g. ``pytest.mark.kafka``) go in `MARKS` so broker cases skip without a broker.

A *live* endpoint (http, websocket, zeromq, grpc) stores nothing: its input must be
listening before its output sends. Its case sets ``live=True`` and the suite opens the input
first; with ``settles_sends`` (a send returns once the input acked it) the suite sends from a
thread (sending.py). A test whose premise the endpoint cannot meet (one of `PREMISES`: a new
reader resumes, a nack hands the message out again, ...) is skipped for that case with the
reason the case gives in `unsupported`, never silently; see the live cases at the end.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import free_port
from tests.mq_bridge.contract.broker_cases import broker_case


@dataclass(frozen=True)
class ContractCase:
    """How to reach one endpoint as an output (writer) and as an input (reader of it)."""

    output_config: dict[str, Any]
    input_config: dict[str, Any]
    #: nack makes the batch available again at once (False: e.g. Kafka, on the next run)
    redelivers_on_nack: bool = True
    #: a bounded source (a file) sets `exhausted` once everything was handed out
    bounded: bool = False
    #: a new reader resumes after what earlier readers acked (False: file `consume` mode
    #: without `delete` keeps no progress, so each new reader starts at the beginning)
    resumes_after_acks: bool = True
    #: run after the test, even a failed one: deletes what the case created on a shared broker
    #: (a stream, queue or topic); see broker_cases.py
    cleanup: Callable[[], None] | None = None
    #: nothing is stored: the input must be connected before the output sends
    live: bool = False
    #: a send returns only once the input settled its messages (ack: returns, nack: raises);
    #: the suite then sends on a thread of its own and settles what it receives meanwhile
    settles_sends: bool = False
    #: premises this endpoint cannot meet (one of `PREMISES`) -> why; their tests skip with it
    unsupported: Mapping[str, str] = field(default_factory=dict)

    def require(self, premise: str) -> None:
        """Skip the calling test, with the case's reason, when `premise` does not hold."""
        assert premise in PREMISES, premise
        if premise in self.unsupported:
            pytest.skip(self.unsupported[premise])


#: What some tests assume of an endpoint, beyond sending and receiving in order.
PREMISES = {
    "ids": "a message's id arrives with it",
    "metadata": "a message's metadata arrives exactly as sent",
    "redelivery": "a nacked message is handed out again",
    "resume": "a new reader, or one opened after the send, gets what was sent before",
    "backlog": "many sends return before the first is settled, so one poll can take them all",
}


def memory_case(tmp_path: Path) -> ContractCase:
    topic = f"contract-{uuid.uuid4().hex[:8]}"
    return ContractCase({"memory": {"topic": topic}}, {"memory": {"topic": topic}})


def memory_url_case(tmp_path: Path) -> ContractCase:
    topic = f"memory://contract-{uuid.uuid4().hex[:8]}"
    return ContractCase({"memory": {"url": topic}}, {"memory": {"url": topic, "capacity": 0}})


def file_consume_delete_case(tmp_path: Path) -> ContractCase:
    """consume mode forgets progress on restart unless acked records are deleted."""
    path = str(tmp_path / "contract" / "log.jsonl")
    reader = {"file": {"path": path, "mode": "consume", "delete": True}}
    return ContractCase({"file": {"path": path}}, reader, bounded=True)


def file_group_case(tmp_path: Path) -> ContractCase:
    path = str(tmp_path / "contract.log")
    reader = {"file": {"path": path, "format": "json", "mode": "group_subscribe", "group_id": "g"}}
    return ContractCase({"file": {"path": path, "format": "json"}}, reader)


def file_consume_case(tmp_path: Path) -> ContractCase:
    """Plain consume mode: acked records stay in the file and a restart reads them again."""
    path = str(tmp_path / "contract.jsonl")
    reader = {"file": {"path": path, "mode": "consume", "delete": False}}
    return ContractCase({"file": {"path": path}}, reader, bounded=True, resumes_after_acks=False)


def twain_case(tmp_path: Path) -> ContractCase:
    """One partition, so that the suite's order checks hold; the reader is a group member."""
    store = {"root": str(tmp_path / "store"), "topic": "contract", "create": {"partitions": 1}}
    return ContractCase({"twain": store}, {"twain": {**store, "group": "g"}})


def redis_streams_case(url: str) -> ContractCase:
    """A fresh stream, read from its start by the default group; cleanup deletes the key."""
    stream = f"contract-{uuid.uuid4().hex[:8]}"
    writer = {"redis_streams": {"url": url, "stream": stream}}
    reader = {"redis_streams": {"url": url, "stream": stream, "read_from_start": True}}

    def cleanup() -> None:
        import redis

        with redis.Redis.from_url(url, socket_timeout=5) as client:
            client.delete(stream)

    return ContractCase(writer, reader, cleanup=cleanup)


CASES: dict[str, Callable[[Path], ContractCase]] = {
    "memory": memory_case,
    "memory-url": memory_url_case,
    "file-consume-delete": file_consume_delete_case,
    "file-group": file_group_case,
    "file-consume": file_consume_case,
    "twain": twain_case,
}

MARKS: dict[str, list[pytest.MarkDecorator]] = {}
CASES["redis_streams"], MARKS["redis_streams"] = broker_case(
    "redis", pytest.mark.redis, redis_streams_case
)


def mqtt_case(address: str) -> ContractCase:
    """A persistent session on a unique topic, made before anything is sent (so it queues)."""
    name = f"contract-{uuid.uuid4().hex[:8]}"
    config = {"mqtt": {"url": f"tcp://{address}", "topic": f"contract/{name}", "client_id": name}}
    gone = {"mqtt": {**config["mqtt"], "clean_session": True}}  # clean start drops the session
    _open_and_close(config)
    return ContractCase(config, config, cleanup=lambda: _open_and_close(gone))


def _open_and_close(config: dict[str, Any]) -> None:
    from mq_bridge.runtime.factory import build_input, new_context

    source = build_input(config, new_context("contract"))
    source.connect()
    source.close()


CASES["mqtt"], MARKS["mqtt"] = broker_case("mqtt", pytest.mark.mqtt, mqtt_case)


def nats_case(url: str) -> ContractCase:
    """A JetStream stream of its own (small limits), deleted with its consumers afterwards."""
    stream = f"contract-{uuid.uuid4().hex[:8]}"
    limits = {"stream_max_bytes": 1 << 20, "stream_max_messages": 10_000}
    config = {"nats": {"url": url, "subject": stream, "stream": stream, **limits}}
    return ContractCase(config, config, cleanup=lambda: _delete_nats_stream(url, stream))


def _delete_nats_stream(url: str, stream: str) -> None:
    from tests.mq_bridge.endpoints.test_nats import delete_stream

    delete_stream(url, stream)


CASES["nats"], MARKS["nats"] = broker_case("nats", pytest.mark.nats, nats_case)


def amqp_case(url: str) -> ContractCase:
    """A durable queue of its own, deleted afterwards."""
    from tests.mq_bridge.endpoints.test_amqp import delete_queue

    queue = f"contract-{uuid.uuid4().hex[:8]}"
    config = {"amqp": {"url": url, "queue": queue}}
    return ContractCase(config, config, cleanup=lambda: delete_queue(url, queue))


CASES["amqp"], MARKS["amqp"] = broker_case("amqp", pytest.mark.amqp, amqp_case)


def kafka_case(bootstrap: str) -> ContractCase:
    """A one-partition topic (the suite checks order), deleted afterwards; a group of its own."""
    from tests.mq_bridge.endpoints.test_kafka import delete_topic, kafka_config

    topic = f"contract-{uuid.uuid4().hex[:8]}"
    writer = kafka_config(bootstrap, topic)
    reader = kafka_config(bootstrap, topic, group_id=f"{topic}-group")
    return ContractCase(writer, reader, cleanup=lambda: delete_topic(bootstrap, topic))


CASES["kafka"], MARKS["kafka"] = broker_case("kafka", pytest.mark.kafka, kafka_case)


def sqlx_case(url: str) -> ContractCase:
    """A table of its own (auto-created by either side), dropped afterwards."""
    from tests.mq_bridge.endpoints.test_sqlx import drop_table, unique_table

    table = unique_table("contract")
    config = {"sqlx": {"url": url, "table": table, "auto_create_table": True}}
    return ContractCase(config, config, cleanup=lambda: drop_table(url, table))


def sqlx_sqlite_case(tmp_path: Path) -> ContractCase:
    """SQLite in a file under tmp_path; ack deletes (the server cases mark processed)."""
    url = f"sqlite://{tmp_path / 'contract.db'}"
    config = {"sqlx": {"url": url, "table": "q", "auto_create_table": True}}
    reader = {"sqlx": {**config["sqlx"], "delete_after_read": True}}
    return ContractCase(config, reader)


CASES["sqlx-postgres"], MARKS["sqlx-postgres"] = broker_case(
    "postgres", pytest.mark.postgres, sqlx_case
)
CASES["sqlx-mysql"], MARKS["sqlx-mysql"] = broker_case("mysql", pytest.mark.mysql, sqlx_case)
CASES["sqlx-sqlite"] = sqlx_sqlite_case


def mongodb_case(url: str) -> ContractCase:
    """A work-queue collection of its own (`_id`s as hex: NX-27017 cannot update documents
    whose `_id` is binary), dropped afterwards."""
    from tests.mq_bridge.endpoints.test_mongodb import drop_collection

    name = f"contract_{uuid.uuid4().hex[:8]}"
    config = {"mongodb": {"url": url, "database": "mq_bridge_test", "collection": name}}
    config["mongodb"]["id_format"] = "hex"
    return ContractCase(config, config, cleanup=lambda: drop_collection(url, name))


CASES["mongodb"], MARKS["mongodb"] = broker_case("mongodb", pytest.mark.mongodb, mongodb_case)


def sled_case(tmp_path: Path) -> ContractCase:
    """sled's queue mode, kept in a twainmq store under tmp_path."""
    writer = {"sled": {"path": str(tmp_path / "sled"), "tree": "contract"}}
    reader = {"sled": {**writer["sled"], "read_from_start": True, "delete_after_read": True}}
    return ContractCase(writer, reader)


CASES["sled"] = sled_case


def aws_case(endpoint: str) -> ContractCase:
    """A FIFO queue of its own (SQS orders only FIFO queues), deleted afterwards."""
    from tests.mq_bridge.endpoints.test_aws import config, delete_queue, new_queue

    url = new_queue(endpoint, "contract", fifo=True)
    settings = config(endpoint, queue_url=url, message_group_id="contract", wait_time_seconds=1)
    return ContractCase(settings, settings, cleanup=lambda: delete_queue(endpoint, url))


CASES["aws"], MARKS["aws"] = broker_case("sqs", pytest.mark.sqs, aws_case)


# -- live endpoints: an input listening on a free loopback port, an output sending to it ----

#: Why no live endpoint can resume: what it was sent is in the input's memory only.
NOTHING_STORED = (
    "nothing is stored: what was sent while no input listened, or left unread when an "
    "input closed, is gone (a live endpoint, not a broker)"
)


def http_case(tmp_path: Path) -> ContractCase:
    """The input answers 202 once a request is queued (`fire_and_forget`), so a returning
    send means "queued at the input", as for a broker; one request at a time keeps order."""
    port = free_port()
    reader = {"http": {"url": f"127.0.0.1:{port}", "path": "/contract", "fire_and_forget": True}}
    writer = {"http": {"url": f"http://127.0.0.1:{port}/contract", "batch_concurrency": 1}}
    unsupported = {
        "metadata": "metadata travels as request headers, and the input adds the request's "
        "own (host, content-length, http_method, ...): test_http.py checks which come back",
        "redelivery": "fire_and_forget answered 202 when the request was queued, so a nack "
        "has no one to tell and drops it (the http-reply case answers a nack with 500)",
        "resume": NOTHING_STORED,
    }
    return ContractCase(writer, reader, live=True, unsupported=unsupported)


def http_reply_case(tmp_path: Path) -> ContractCase:
    """The input answers each request with its outcome (202 on ack, 500 on nack), so a
    send returns only once the input settled it."""
    port = free_port()
    reader = {"http": {"url": f"127.0.0.1:{port}", "path": "/contract"}}
    writer = {"http": {"url": f"http://127.0.0.1:{port}/contract", "batch_concurrency": 1}}
    unsupported = {
        "metadata": "metadata travels as request headers, and the input adds the request's "
        "own (host, content-length, http_method, ...): test_http.py checks which come back",
        "redelivery": "a nack answers the request 500: the client's send raises and the "
        "client decides whether to send again (tested as such)",
        "resume": NOTHING_STORED,
        "backlog": "one request at a time (batch_concurrency 1, for order), each answered "
        "once settled: the next goes out after the previous was acked",
    }
    return ContractCase(writer, reader, live=True, settles_sends=True, unsupported=unsupported)


def websocket_case(tmp_path: Path) -> ContractCase:
    """One client connection: frames arrive in the order sent."""
    port = free_port()
    reader = {"websocket": {"url": f"127.0.0.1:{port}", "path": "/contract"}}
    writer = {"websocket": {"url": f"ws://127.0.0.1:{port}/contract"}}
    unsupported = {
        "ids": "a frame carries its payload only: the input gives each a new id",
        "metadata": "a frame carries its payload only; the input adds ws_* metadata of the "
        "connection",
        "redelivery": "WebSocket has no negative answer for a frame: a nack drops it",
        "resume": NOTHING_STORED,
    }
    return ContractCase(writer, reader, live=True, unsupported=unsupported)


def zeromq_case(tmp_path: Path) -> ContractCase:
    """PULL binds (the input), PUSH connects; `json` frames carry ids and metadata."""
    url = f"tcp://127.0.0.1:{free_port()}"
    reader = {"zeromq": {"url": url, "socket_type": "pull", "bind": True}}
    writer = {"zeromq": {"url": url, "socket_type": "push", "request_timeout_ms": 10_000}}
    return ContractCase(writer, reader, live=True, unsupported={"resume": NOTHING_STORED})


def grpc_case(tmp_path: Path) -> ContractCase:
    """A server-mode input and a client output; the server answers a publish once the
    input settled it (ack: the send returns; nack: it raises)."""
    port = free_port()
    topic = f"contract-{uuid.uuid4().hex[:8]}"
    reader = {"grpc": {"url": f"127.0.0.1:{port}", "server_mode": True, "topic": topic}}
    writer = {
        "grpc": {
            "url": f"http://127.0.0.1:{port}",
            "topic": topic,
            "connect_timeout_ms": 3000,
            "timeout_ms": 20_000,
        }
    }
    unsupported = {
        "metadata": "the server-mode input adds `mq_bridge.topic` and a `correlation_id` "
        "(for a `response` output) to what was sent",
        "redelivery": "a nack answers the publisher NACK: its send raises and the client "
        "decides whether to send again (tested as such)",
        "resume": NOTHING_STORED,
    }
    return ContractCase(writer, reader, live=True, settles_sends=True, unsupported=unsupported)


CASES["http"] = http_case
CASES["http-reply"] = http_reply_case
CASES["websocket"] = websocket_case
CASES["zeromq"] = zeromq_case
CASES["grpc"] = grpc_case
