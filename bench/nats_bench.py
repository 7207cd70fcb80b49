"""NATS JetStream throughput through the seed's public API only, so one script measures us
and the peer (mq-bridge 1.2.0 in its own venv):

    $(scripts/peer-venv.sh mq-bridge) bench/nats_bench.py --scenario all
    .venv/bin/python bench/nats_bench.py --scenario all

Scenarios (~100 B JSON, the local NATS server with JetStream; median of --runs):

    route       NATS -> route(with_handler returning the message) -> NATS, batch 512;
                timed from the route's start over a pre-filled backlog until a Consumer
                on the output stream has read every message
    send-json   Publisher.send_json one at a time, each waiting for its PubAck
    send-batch  Publisher.send_batch of 500
    poll        Consumer.poll(max=500) + commit() over a pre-filled stream

Every stream is created small (stream_max_bytes) and deleted at the end of its run, with a
minimal raw-protocol client (no client library needed in either venv).
"""

from __future__ import annotations

import json
import socket
import sys
import time
import uuid

from harness import DOC, KIND, close, drain, fill, run_scenarios
from mq_bridge import Publisher, Route

URL = "nats://127.0.0.1:4222"


def config(stream: str, count: int) -> dict:
    limits = {"stream_max_bytes": max(8 << 20, count * 600), "stream_max_messages": count + 10}
    return {"nats": {"url": URL, "stream": stream, "subject": f"{stream}.in", **limits}}


def delete_stream(name: str) -> None:
    """$JS.API.STREAM.DELETE over a raw connection (bounded: 5 s)."""
    with socket.create_connection(("127.0.0.1", 4222), timeout=5) as sock:
        sock.recv(4096)  # INFO
        reply = f"_INBOX.bench{uuid.uuid4().hex}"
        sock.sendall(
            b'CONNECT {"verbose":false}\r\n'
            + f"SUB {reply} 1\r\nPUB $JS.API.STREAM.DELETE.{name} {reply} 0\r\n\r\n".encode()
        )
        data = b""
        while b"MSG " not in data or not data.endswith(b"\r\n"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk


def route_run(count: int) -> float:
    source, sink = f"bench-in-{uuid.uuid4().hex[:8]}", f"bench-out-{uuid.uuid4().hex[:8]}"
    try:
        fill(config(source, count), count)
        route = Route.from_config(
            {"input": config(source, count), "output": config(sink, count), "batch_size": 512}
        ).with_handler(lambda message: message)
        started = time.perf_counter()
        route.start()
        seen = drain(config(sink, count), count)
        elapsed = time.perf_counter() - started
        route.stop()
        if seen != count:
            sys.exit(f"routed {seen} of {count}")
        return count / elapsed
    finally:
        delete_stream(source)
        delete_stream(sink)


def send_json_run(count: int) -> float:
    stream = f"bench-send-{uuid.uuid4().hex[:8]}"
    try:
        publisher = Publisher.from_config(config(stream, count))
        started = time.perf_counter()
        for n in range(count):
            DOC["n"] = n
            publisher.send_json(DOC, KIND)
        elapsed = time.perf_counter() - started
        close(publisher)
        return count / elapsed
    finally:
        delete_stream(stream)


def send_batch_run(count: int) -> float:
    stream = f"bench-batch-{uuid.uuid4().hex[:8]}"
    try:
        publisher = Publisher.from_config(config(stream, count))
        payloads = []
        for n in range(count):
            DOC["n"] = n
            payloads.append(json.dumps(DOC).encode())
        started = time.perf_counter()
        for start in range(0, count, 500):
            publisher.send_batch(payloads[start : start + 500])
        elapsed = time.perf_counter() - started
        close(publisher)
        return count / elapsed
    finally:
        delete_stream(stream)


def poll_run(count: int) -> float:
    stream = f"bench-poll-{uuid.uuid4().hex[:8]}"
    try:
        fill(config(stream, count), count)
        started = time.perf_counter()
        seen = drain(config(stream, count), count)
        elapsed = time.perf_counter() - started
        if seen != count:
            sys.exit(f"polled {seen} of {count}")
        return count / elapsed
    finally:
        delete_stream(stream)


SCENARIOS = {
    "route": (route_run, 50_000),
    "send-json": (send_json_run, 10_000),
    "send-batch": (send_batch_run, 50_000),
    "poll": (poll_run, 50_000),
}


if __name__ == "__main__":
    run_scenarios(__doc__, SCENARIOS)
