"""Redis Streams throughput of mq_bridge, using only the public API of the seed.

One script measures us and the peer (mq-bridge 1.2.0 in its own venv), in the same sitting:

    $(scripts/peer-venv.sh mq-bridge) bench/redis_streams_bench.py --scenario all
    .venv/bin/python bench/redis_streams_bench.py --scenario all

Scenarios (~100 B JSON messages; each figure is the median of --runs):

    send-json    Publisher.send_json one at a time (each returns once Redis answered XADD)
    send-batch   Publisher.send_batch of 500 messages
    consume      Consumer.poll(max=500) + commit() over a pre-filled stream (read_from_start),
                 reading .payload, until everything was read
    route        a pre-filled stream -> route(with_handler returning the message) -> another
                 stream, timed from start() until a Consumer has read everything from the
                 second stream

Every stream is unique per run and deleted afterwards (a raw RESP DEL over a socket: the
peer's venv has no Redis client).
"""

from __future__ import annotations

import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

from harness import run_scenarios
from mq_bridge import Consumer, Message, Publisher, Route

URL = "redis://127.0.0.1:6379"
DOC = {
    "order_id": 0,
    "customer": "c-000042",
    "sku": "SKU-7731-BLUE",
    "amount": 129.95,
    "currency": "EUR",
    "n": 0,
}  # ~100 B as compact JSON
METADATA = {"kind": "order.created"}


def delete_keys(*keys: str) -> None:
    """DEL the streams (with their groups) over a plain socket."""
    parts = urlsplit(URL)
    command = b"*%d\r\n$3\r\nDEL\r\n" % (len(keys) + 1)
    for key in keys:
        command += b"$%d\r\n%s\r\n" % (len(key), key.encode())
    with socket.create_connection((parts.hostname, parts.port or 6379), timeout=10) as conn:
        conn.sendall(command)
        conn.recv(64)


def stream_names(tag: str) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"bench-{tag}-a-{suffix}", f"bench-{tag}-b-{suffix}"


@contextmanager
def publisher_for(stream: str) -> Iterator[Publisher]:
    """A publisher, closed afterwards where the API has `close` (mq-bridge 1.2.0's has not)."""
    publisher = Publisher.from_config(config(stream))
    try:
        yield publisher
    finally:
        close = getattr(publisher, "close", None)
        if close is not None:
            close()


def config(stream: str, **options: object) -> dict[str, dict[str, object]]:
    return {"redis_streams": {"url": URL, "stream": stream, **options}}


def fill(stream: str, count: int) -> None:
    with publisher_for(stream) as publisher:
        for start in range(0, count, 500):
            publisher.send_batch(
                [
                    Message.from_json({**DOC, "n": n}, METADATA)
                    for n in range(start, min(start + 500, count))
                ]
            )


def send_json_run(count: int) -> float:
    stream, _ = stream_names("send")
    try:
        with publisher_for(stream) as publisher:
            started = time.perf_counter()
            for n in range(count):
                DOC["n"] = n
                publisher.send_json(DOC, METADATA)
            return count / (time.perf_counter() - started)
    finally:
        delete_keys(stream)


def send_batch_run(count: int) -> float:
    stream, _ = stream_names("batch")
    batches = [
        [Message.from_json({**DOC, "n": n}, METADATA) for n in range(s, min(s + 500, count))]
        for s in range(0, count, 500)
    ]
    try:
        with publisher_for(stream) as publisher:
            started = time.perf_counter()
            for batch in batches:
                publisher.send_batch(batch)
            return count / (time.perf_counter() - started)
    finally:
        delete_keys(stream)


def drain(consumer: Consumer, count: int, timeout: float = 120.0) -> int:
    seen = 0
    deadline = time.monotonic() + timeout
    while seen < count and time.monotonic() < deadline:
        batch = consumer.poll(max=500, timeout_ms=1000)
        for message in batch:
            _ = message.payload
        seen += len(batch)
        if batch:
            consumer.commit()
    return seen


def consume_run(count: int) -> float:
    stream, _ = stream_names("consume")
    try:
        fill(stream, count)
        with Consumer.from_config(config(stream, read_from_start=True)) as consumer:
            started = time.perf_counter()
            seen = drain(consumer, count)
            elapsed = time.perf_counter() - started
        if seen != count:
            sys.exit(f"consumed {seen} of {count}")
        return count / elapsed
    finally:
        delete_keys(stream)


def route_run(count: int) -> float:
    source, sink = stream_names("route")
    try:
        fill(source, count)
        route = Route.from_config(
            {
                "input": config(source, read_from_start=True),
                "output": config(sink),
                "batch_size": 512,
            }
        ).with_handler(lambda message: message)
        with Consumer.from_config(config(sink, read_from_start=True)) as consumer:
            started = time.perf_counter()
            with route:
                seen = drain(consumer, count)
                elapsed = time.perf_counter() - started
        if seen != count:
            sys.exit(f"routed {seen} of {count}")
        return count / elapsed
    finally:
        delete_keys(source, sink)


SCENARIOS: dict[str, tuple[Callable[[int], float], int]] = {
    "send-json": (send_json_run, 20_000),
    "send-batch": (send_batch_run, 100_000),
    "consume": (consume_run, 100_000),
    "route": (route_run, 50_000),
}


if __name__ == "__main__":
    run_scenarios(__doc__, SCENARIOS)
