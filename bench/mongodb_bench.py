"""MongoDB throughput through the seed's public API only, so one script measures us and the
peers (mq-bridge-py 0.3.2 and mq-bridge 1.2.0, each in its own venv), in one sitting:

    .peers/mq-bridge-py/bin/python bench/mongodb_bench.py --scenario all
    .peers/mq-bridge/bin/python bench/mongodb_bench.py --scenario all
    .venv/bin/python bench/mongodb_bench.py --scenario all

Scenarios (~100 B JSON, the local MongoDB-protocol server; median of --runs):

    send-json   Publisher.send_json one at a time (each returns once the insert was acked)
    send-batch  Publisher.send_batch of 500 (mq-bridge-py 0.3.2 has no send_batch)
    consume     work queue: Consumer.poll(max=500) + commit() over a pre-filled collection
                (claim, then delete on commit), until everything was read
    subscribe   change stream: a subscriber opened first, then the collection filled with
                send_batch, until the subscriber has read (and committed) everything
    route       work queue -> route(with_handler returning the message) -> another
                collection, batch 512, timed from start() until a change-stream Consumer
                opened before has read everything

Ours runs with ``id_format: hex`` (NX-27017 cannot update documents whose `_id` is binary:
no work queue works there with mq-bridge's UUID `_id`s); the peers run with their defaults
(mq-bridge 1.2.0 with ``consume: delete`` for the work queue, ``capture_new`` for the change
stream). A scenario that fails prints the error and scores 0. Every collection is unique per
run and dropped afterwards with a raw OP_MSG (no client library needed in either venv).
"""

from __future__ import annotations

import socket
import struct
import sys
import time
import traceback
import uuid
from collections.abc import Callable

from harness import DOC, KIND, close, run_scenarios
from mq_bridge import Consumer, Message, Publisher, Route, config_schema

URL = "mongodb://127.0.0.1:27017/"
DATABASE = "mq_bridge_bench"


def _mongodb_schema() -> dict:
    definitions = config_schema().get("$defs", {})
    return definitions.get("MongoDbConfig") or definitions.get("MongoDbOptions") or {}


PROPERTIES = set(_mongodb_schema().get("properties", {}))
OURS = "id_format" in PROPERTIES
HAS_CONSUME = "consume" in PROPERTIES  # mq-bridge 1.2.0's selector


def config(collection: str, mode: str = "queue") -> dict:
    options: dict[str, object] = {"url": URL, "database": DATABASE, "collection": collection}
    if OURS:
        options["id_format"] = "hex"
    if mode == "subscribe":
        if HAS_CONSUME:
            options["consume"] = "capture_new"
        else:
            options["change_stream"] = True
    elif mode == "queue" and HAS_CONSUME and not OURS:
        options["consume"] = "delete"
    return {"mongodb": options}


def drop(*collections: str) -> None:
    """The `drop` command for each collection, as OP_MSG over a raw socket (bounded: 5 s)."""
    with socket.create_connection(("127.0.0.1", 27017), timeout=5) as sock:
        for request_id, name in enumerate(collections, 1):
            body = _bson({"drop": name, "$db": DATABASE})
            message = struct.pack("<I", 0) + b"\x00" + body
            sock.sendall(struct.pack("<iiii", 16 + len(message), request_id, 0, 2013) + message)
            (length,) = struct.unpack("<i", _read(sock, 4))
            _read(sock, length - 4)


def _bson(document: dict[str, str]) -> bytes:
    """A BSON document of string values."""
    elements = b""
    for key, value in document.items():
        text = value.encode() + b"\x00"
        elements += b"\x02" + key.encode() + b"\x00" + struct.pack("<i", len(text)) + text
    return struct.pack("<i", len(elements) + 5) + elements + b"\x00"


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk
    return data


def names(tag: str) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"bench_{tag}_a_{suffix}", f"bench_{tag}_b_{suffix}"


def batches(count: int) -> list[list[Message]]:
    return [
        [Message.from_json({**DOC, "n": n}, KIND) for n in range(start, min(start + 500, count))]
        for start in range(0, count, 500)
    ]


def send_all(publisher: Publisher, count: int) -> None:
    """`count` documents, 500 per send_batch (one at a time where there is no send_batch)."""
    for batch in batches(count):
        if hasattr(publisher, "send_batch"):
            publisher.send_batch(batch)
        else:
            for message in batch:
                publisher.send(message)


def read_all(consumer: Consumer, count: int, timeout: float) -> int:
    seen, deadline = 0, time.monotonic() + timeout
    while seen < count and time.monotonic() < deadline:
        batch = consumer.poll(max=500, timeout_ms=1000)
        for message in batch:
            _ = message.payload
        seen += len(batch)
        if batch:
            consumer.commit()
    return seen


def send_json_run(count: int) -> float:
    collection, _ = names("send")
    try:
        publisher = Publisher.from_config(config(collection))
        started = time.perf_counter()
        for n in range(count):
            DOC["n"] = n
            publisher.send_json(DOC, KIND)
        elapsed = time.perf_counter() - started
        close(publisher)
        return count / elapsed
    finally:
        drop(collection)


def send_batch_run(count: int) -> float:
    collection, _ = names("batch")
    prepared = batches(count)
    try:
        publisher = Publisher.from_config(config(collection))
        if not hasattr(publisher, "send_batch"):
            raise RuntimeError("this Publisher has no send_batch")
        started = time.perf_counter()
        for batch in prepared:
            publisher.send_batch(batch)
        elapsed = time.perf_counter() - started
        close(publisher)
        return count / elapsed
    finally:
        drop(collection)


def consume_run(count: int) -> float:
    collection, _ = names("consume")
    try:
        publisher = Publisher.from_config(config(collection))
        send_all(publisher, count)
        close(publisher)
        consumer = Consumer.from_config(config(collection))
        started = time.perf_counter()
        seen = read_all(consumer, count, timeout=60.0)
        elapsed = time.perf_counter() - started
        consumer.close()
        if seen != count:
            raise RuntimeError(f"consumed {seen} of {count}")
        return count / elapsed
    finally:
        drop(collection)


def subscribe_run(count: int) -> float:
    collection, _ = names("subscribe")
    try:
        consumer = Consumer.from_config(config(collection, "subscribe"))
        publisher = Publisher.from_config(config(collection))
        started = time.perf_counter()
        send_all(publisher, count)
        seen = read_all(consumer, count, timeout=60.0)
        elapsed = time.perf_counter() - started
        close(publisher)
        consumer.close()
        if seen != count:
            raise RuntimeError(f"received {seen} of {count}")
        return count / elapsed
    finally:
        drop(collection)


def route_run(count: int) -> float:
    source, sink = names("route")
    try:
        publisher = Publisher.from_config(config(source))
        send_all(publisher, count)
        close(publisher)
        route = Route.from_config(
            {"input": config(source), "output": config(sink), "batch_size": 512}
        ).with_handler(lambda message: message)
        consumer = Consumer.from_config(config(sink, "subscribe"))
        started = time.perf_counter()
        with route:
            seen = read_all(consumer, count, timeout=60.0)
            elapsed = time.perf_counter() - started
        consumer.close()
        if seen != count:
            raise RuntimeError(f"routed {seen} of {count}")
        return count / elapsed
    finally:
        drop(source, sink)


def guarded(run: Callable[[int], float]) -> Callable[[int], float]:
    """A failed run prints why and scores 0 (the peers fail some scenarios on NX-27017)."""

    def attempt(count: int) -> float:
        try:
            return run(count)
        except Exception as error:  # reported, then the next run
            line = traceback.format_exception_only(type(error), error)[-1].strip()
            print(f"  {run.__name__} failed: {line[:300]}", file=sys.stderr, flush=True)
            return 0.0

    return attempt


SCENARIOS: dict[str, tuple[Callable[[int], float], int]] = {
    "send-json": (guarded(send_json_run), 3_000),
    "send-batch": (guarded(send_batch_run), 20_000),
    "consume": (guarded(consume_run), 20_000),
    "subscribe": (guarded(subscribe_run), 10_000),
    "route": (guarded(route_run), 10_000),
}


if __name__ == "__main__":
    run_scenarios(__doc__, SCENARIOS)
