"""ZeroMQ endpoint throughput over loopback TCP (no broker), seed public API only.

One script measures us and the peer (mq-bridge 1.2.0 in its own venv), in the same sitting
(run it from bench/, so both import the same harness):

    cd bench && ../.peers/mq-bridge/bin/python zeromq_bench.py --scenario all [--processes]
    cd bench && ../.venv/bin/python zeromq_bench.py --scenario all [--processes]

Two modes:

    default        publisher and consumer in ONE process: the consumer drains on a thread
                   while the main thread sends. For us both sides share one GIL, so the
                   figure is the sum of both sides' Python work (the peer's is in Rust).
    --processes    the publisher runs in a child process (same python, sys.executable),
                   the consumer in the parent: how PUSH/PULL is deployed. Each side has its
                   own interpreter and core, so the figure is the slower side's rate.
                   (req-rep stays in one process.)

Scenarios (~100 B JSON with one metadata key; each figure is the median of --runs):

    batch-json     PUSH -> PULL, Publisher.send_batch of 500, format json (one frame per
                   batch: 0.3.2's wire form; ids and metadata travel)
    batch-framed   the same with format raw_framed (1.2.0's default: two frames per message)
    send-json      Publisher.send_json one at a time, format json
    send-framed    Publisher.send_json one at a time, format raw_framed
    req-rep        Publisher.request_json round trips to a route (REP -> handler -> response)

The rate is messages received by the consumer per second, from the first send to the last
message polled (so a publisher that only queues locally gains nothing). With --processes the
clock starts when the parent tells the child, already connected, to start sending.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from harness import close, drain_consumer, run_scenarios
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
    """One process: the consumer drains on a thread while this thread sends."""
    port = free_port()
    consumer = Consumer.from_config(config(port, "pull", fmt, True))
    publisher = Publisher.from_config(config(port, "push", fmt, False))
    publisher.send(Message(b"warm-up", META))  # the connection is up before timing
    warm_up(consumer)
    got = [0]
    reader = threading.Thread(target=lambda: got.__setitem__(0, drain_consumer(consumer, count)))
    started = time.perf_counter()
    reader.start()
    send(publisher, count)
    reader.join()
    elapsed = time.perf_counter() - started
    close(publisher)
    return finish(consumer, got[0], count, elapsed)


def push_pull_processes(count: int, fmt: str, send: Callable[[Any, int], None]) -> float:
    """Two processes: a child (this script, `--child`) sends, this process consumes."""
    port = free_port()
    consumer = Consumer.from_config(config(port, "pull", fmt, True))
    args = [sys.executable, __file__, "--child", str(port), fmt, send.__name__, str(count)]
    child = subprocess.Popen(args, stdin=subprocess.PIPE, text=True)
    assert child.stdin is not None
    try:
        warm_up(consumer)  # the child connected and sent its warm-up message
        started = time.perf_counter()
        child.stdin.write("go\n")
        child.stdin.flush()
        got = drain_consumer(consumer, count)
        elapsed = time.perf_counter() - started
    finally:
        child.stdin.close()  # the child closes its publisher and exits
        child.wait(timeout=60)
    return finish(consumer, got, count, elapsed)


def child_publisher(port: int, fmt: str, send_name: str, count: int) -> None:
    """The `--child` side: connect, send the warm-up, wait for "go", send, wait for EOF."""
    publisher = Publisher.from_config(config(port, "push", fmt, False))
    publisher.send(Message(b"warm-up", META))
    if sys.stdin.readline().strip() == "go":
        SENDERS[send_name](publisher, count)
    sys.stdin.read()  # the parent has received everything: queued frames are delivered
    close(publisher)


def warm_up(consumer: Any) -> None:
    assert len(consumer.poll(max=1, timeout_ms=10_000)) == 1
    consumer.commit()


def finish(consumer: Any, got: int, count: int, elapsed: float) -> float:
    consumer.close()
    if got < count:
        sys.exit(f"got {got} of {count}")
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


SENDERS = {"send_batches": send_batches, "send_one_by_one": send_one_by_one}


def scenarios(processes: bool) -> dict[str, Any]:
    run = push_pull_processes if processes else push_pull
    return {
        "batch-json": (lambda n: run(n, "json", send_batches), 200_000),
        "batch-framed": (lambda n: run(n, "raw_framed", send_batches), 200_000),
        "send-json": (lambda n: run(n, "json", send_one_by_one), 30_000),
        "send-framed": (lambda n: run(n, "raw_framed", send_one_by_one), 30_000),
        "req-rep": (req_rep, 3_000),
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child_publisher(int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]))
        sys.exit()
    processes = "--processes" in sys.argv
    if processes:
        sys.argv.remove("--processes")  # the harness parses the rest
    run_scenarios(__doc__, scenarios(processes))
