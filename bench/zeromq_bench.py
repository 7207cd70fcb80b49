"""ZeroMQ endpoint throughput over loopback TCP (no broker), seed public API only.

One script measures us and the peer (mq-bridge 1.2.0 in its own venv), in the same sitting:

    $(scripts/peer-venv.sh mq-bridge) bench/zeromq_bench.py --scenario all
    .venv/bin/python bench/zeromq_bench.py --scenario all

Scenarios (~100 B JSON with one metadata key; each figure is the median of --runs; the
consumer drains on a thread of the same process while the publisher sends):

    batch-json     PUSH -> PULL, Publisher.send_batch of 500, format json (one frame per
                   batch: 0.3.2's wire form; ids and metadata travel)
    batch-framed   the same with format raw_framed (1.2.0's default: two frames per message)
    send-json      Publisher.send_json one at a time, format json
    send-framed    Publisher.send_json one at a time, format raw_framed
    req-rep        Publisher.request_json round trips to a route (REP -> handler -> response)

The rate is messages received by the consumer per second, from the first send to the last
message polled (so a publisher that only queues locally gains nothing).
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from harness import close, run_scenarios
from mq_bridge import Consumer, Message, Publisher, Route

DOC = {"order_id": 0, "customer": "c-000042", "sku": "SKU-7731-BLUE", "amount": 129.95, "n": 0}
META = {"kind": "order.created"}
PAYLOAD = b'{"order_id":0,"customer":"c-000042","sku":"SKU-7731-BLUE","amount":129.95,"n":0}'


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def config(port: int, socket_type: str, fmt: str, bind: bool) -> dict[str, Any]:
    url = f"tcp://127.0.0.1:{port}"
    return {"zeromq": {"url": url, "socket_type": socket_type, "bind": bind, "format": fmt}}


def push_pull(count: int, fmt: str, send: Callable[[Any, int], None]) -> float:
    port = free_port()
    consumer = Consumer.from_config(config(port, "pull", fmt, True))
    publisher = Publisher.from_config(config(port, "push", fmt, False))
    publisher.send(Message(b"warm-up", META))  # the connection is up before timing
    assert len(consumer.poll(max=1, timeout_ms=5000)) == 1
    consumer.commit()
    got = [0]

    def drain() -> None:
        deadline = time.monotonic() + 120
        while got[0] < count and time.monotonic() < deadline:
            batch = consumer.poll(max=500, timeout_ms=1000)
            for message in batch:
                _ = message.payload
            got[0] += len(batch)
            consumer.commit()

    reader = threading.Thread(target=drain)
    started = time.perf_counter()
    reader.start()
    send(publisher, count)
    reader.join()
    elapsed = time.perf_counter() - started
    close(publisher)
    consumer.close()
    if got[0] < count:
        sys.exit(f"got {got[0]} of {count}")
    return count / elapsed


def send_batches(publisher: Any, count: int) -> None:
    batch = [Message(PAYLOAD, META) for _ in range(500)]
    for _ in range(count // 500):
        publisher.send_batch(batch)


def send_one_by_one(publisher: Any, count: int) -> None:
    for n in range(count):
        DOC["n"] = n
        publisher.send_json(DOC, META)


def req_rep(count: int) -> float:
    port = free_port()
    route = Route.from_config(
        {"input": config(port, "rep", "json", True), "output": {"response": {}}}
    ).with_handler(lambda message: message)
    route.start()
    publisher = Publisher.from_config(config(port, "req", "json", False))
    try:
        publisher.request_json(DOC, META)  # warm-up
        started = time.perf_counter()
        for n in range(count):
            DOC["n"] = n
            publisher.request_json(DOC, META)
        elapsed = time.perf_counter() - started
    finally:
        close(publisher)
        route.stop()
    return count / elapsed


SCENARIOS = {
    "batch-json": (lambda n: push_pull(n, "json", send_batches), 200_000),
    "batch-framed": (lambda n: push_pull(n, "raw_framed", send_batches), 200_000),
    "send-json": (lambda n: push_pull(n, "json", send_one_by_one), 30_000),
    "send-framed": (lambda n: push_pull(n, "raw_framed", send_one_by_one), 30_000),
    "req-rep": (req_rep, 3_000),
}

if __name__ == "__main__":
    run_scenarios(__doc__, SCENARIOS)
