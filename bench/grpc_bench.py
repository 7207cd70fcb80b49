"""gRPC endpoint throughput over loopback (the ``mqbridge.Bridge`` service), public API only.

One script measures us and the peer (mq-bridge 1.2.0 in its own venv), in the same sitting:

    $(scripts/peer-venv.sh mq-bridge) bench/grpc_bench.py --scenario all
    .venv/bin/python bench/grpc_bench.py --scenario all

Scenarios (~100 B JSON with one metadata key; each figure is the median of --runs; a
server-mode Consumer drains and commits on a thread, and a send returns only once the
server answered, i.e. once the consumer committed):

    batch      Publisher.send_batch of 500 (one PublishBatch stream each)
    send-json  Publisher.send_json one at a time (unary Publish)
    request    Publisher.request_json round trips to a route (server -> handler -> response)

Two modes (the same sends, timed the same way, from the warm-up's answer to the last one):

    (default)    the publisher and the server side share one process: with us, one GIL for
                 the client's and the server's Python work (the peer's runs in Rust threads)
    --processes  the publisher runs in a child process (the same python), the server side
                 (Consumer or Route) in this one, as gRPC is deployed; the child times its
                 sends and reports the rate
"""

from __future__ import annotations

import socket
import subprocess
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


def publish(count: int, name: str) -> float:
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
    try:
        rate = sender(port, count, name)
    finally:
        stop.set()
        reader.join()
        consumer.close()
    if got[0] < count:
        sys.exit(f"got {got[0]} of {count}")
    return rate


def sender(port: int, count: int, name: str) -> float:
    """`SENDERS[name]` to the server on `port`: msg/s, here or in a child process."""
    if not PROCESSES:
        return timed_send(port, count, name)
    command = [sys.executable, __file__, "--sender", name, str(port), str(count)]
    return float(subprocess.run(command, check=True, capture_output=True, text=True).stdout)


def timed_send(port: int, count: int, name: str) -> float:
    publisher = Publisher.from_config(client(port))
    try:
        publisher.send(Message(b"warm-up", META))
        started = time.perf_counter()
        SENDERS[name](publisher, count)
        return count / (time.perf_counter() - started)
    finally:
        close(publisher)


def send_batches(publisher: Any, count: int) -> None:
    batch = [Message(PAYLOAD, META) for _ in range(500)]
    for _ in range(count // 500):
        publisher.send_batch(batch)


def send_one_by_one(publisher: Any, count: int) -> None:
    for n in range(count):
        DOC["n"] = n
        publisher.send_json(DOC, META)


def request_one_by_one(publisher: Any, count: int) -> None:
    for n in range(count):
        DOC["n"] = n
        publisher.request_json(DOC, META)


def request(count: int) -> float:
    port = free_port()
    route = Route.from_config({"input": server(port), "output": {"response": {}}})
    route = route.with_handler(lambda message: message)
    route.start()
    try:
        return sender(port, count, "request")
    finally:
        route.stop()


SENDERS: dict[str, Callable[[Any, int], None]] = {
    "batch": send_batches,
    "send-json": send_one_by_one,
    "request": request_one_by_one,
}
SCENARIOS = {
    "batch": (lambda n: publish(n, "batch"), 50_000),
    "send-json": (lambda n: publish(n, "send-json"), 3_000),
    "request": (request, 2_000),
}

PROCESSES = "--processes" in sys.argv  # the harness parses the other options

if __name__ == "__main__":
    if sys.argv[1:2] == ["--sender"]:  # the child of --processes
        name, port, count = sys.argv[2:5]
        print(timed_send(int(port), int(count), name))
        sys.exit()
    if PROCESSES:
        sys.argv.remove("--processes")
        print("publisher in a child process", flush=True)
    run_scenarios(__doc__, SCENARIOS)
