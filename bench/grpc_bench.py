"""gRPC endpoint throughput over loopback (the ``mqbridge.Bridge`` service), public API only.

One script measures us and the peer (mq-bridge 1.2.0 in its own venv), in the same sitting:

    $(scripts/peer-venv.sh mq-bridge) bench/grpc_bench.py --scenario all
    .venv/bin/python bench/grpc_bench.py --scenario all

Scenarios (~100 B JSON with one metadata key; each figure is the median of --runs; a
server-mode Consumer drains and commits on a thread of the same process, and a send
returns only once the server answered, i.e. once the consumer committed):

    batch      Publisher.send_batch of 500 (one PublishBatch stream each)
    send-json  Publisher.send_json one at a time (unary Publish)
    request    Publisher.request_json round trips to a route (server -> handler -> response)
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


def server(port: int) -> dict[str, Any]:
    return {"grpc": {"url": f"127.0.0.1:{port}", "server_mode": True, "topic": "bench"}}


def client(port: int) -> dict[str, Any]:
    return {"grpc": {"url": f"http://127.0.0.1:{port}", "topic": "bench"}}


def publish(count: int, send: Callable[[Any, int], None]) -> float:
    port = free_port()
    consumer = Consumer.from_config(server(port))
    got = [0]
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set():
            batch = consumer.poll(max=500, timeout_ms=200)
            for message in batch:
                _ = message.payload
            got[0] += len(batch)
            if batch:
                consumer.commit()

    reader = threading.Thread(target=drain)
    reader.start()
    publisher = Publisher.from_config(client(port))
    try:
        publisher.send(Message(b"warm-up", META))
        started = time.perf_counter()
        send(publisher, count)
        elapsed = time.perf_counter() - started
    finally:
        stop.set()
        reader.join()
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


def request(count: int) -> float:
    port = free_port()
    route = Route.from_config({"input": server(port), "output": {"response": {}}})
    route = route.with_handler(lambda message: message)
    route.start()
    publisher = Publisher.from_config(client(port))
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
    "batch": (lambda n: publish(n, send_batches), 50_000),
    "send-json": (lambda n: publish(n, send_one_by_one), 3_000),
    "request": (request, 2_000),
}

if __name__ == "__main__":
    run_scenarios(__doc__, SCENARIOS)
