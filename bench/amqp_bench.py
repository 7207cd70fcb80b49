"""RabbitMQ (AMQP) throughput through the seed's public API only, so one script measures us
and the peer (mq-bridge 1.2.0 in its own venv):

    $(scripts/peer-venv.sh mq-bridge) bench/amqp_bench.py --scenario all
    .venv/bin/python bench/amqp_bench.py --scenario all

Scenarios (~100 B JSON; the local RabbitMQ; durable queues, persistent messages,
publisher confirms; median of --runs):

    route       RabbitMQ -> route(with_handler returning the message) -> RabbitMQ,
                batch 512; timed from the route's start over a pre-filled backlog until a
                Consumer on the output queue has read every message
    send-json   Publisher.send_json one at a time, each waiting for its confirm
    send-batch  Publisher.send_batch of 500
    poll        Consumer.poll(max=500) + commit() over a pre-filled queue

The URL names the vhost as ``/%2f``: the peer (lapin) reads a bare trailing ``/`` as the
empty vhost. Every queue is deleted at the end of its run with ``rabbitmqctl`` (bounded),
so no client library is needed in either venv.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

from harness import DOC, KIND, close, drain, fill, payloads, run_scenarios
from mq_bridge import Publisher, Route

URL = "amqp://guest:guest@127.0.0.1:5672/%2f"


def config(queue: str) -> dict:
    return {"amqp": {"url": URL, "queue": queue}}


def delete_queue(name: str) -> None:
    """``rabbitmqctl delete_queue`` (bounded: 30 s); a missing queue is fine."""
    subprocess.run(
        ["rabbitmqctl", "delete_queue", name], capture_output=True, timeout=30, check=False
    )


def route_run(count: int) -> float:
    source, sink = f"bench-in-{uuid.uuid4().hex[:8]}", f"bench-out-{uuid.uuid4().hex[:8]}"
    try:
        fill(config(source), count)
        route = Route.from_config(
            {"input": config(source), "output": config(sink), "batch_size": 512}
        ).with_handler(lambda message: message)
        started = time.perf_counter()
        route.start()
        seen = drain(config(sink), count)
        elapsed = time.perf_counter() - started
        route.stop()
        if seen != count:
            sys.exit(f"routed {seen} of {count}")
        return count / elapsed
    finally:
        delete_queue(source)
        delete_queue(sink)


def send_json_run(count: int) -> float:
    queue = f"bench-send-{uuid.uuid4().hex[:8]}"
    try:
        publisher = Publisher.from_config(config(queue))
        started = time.perf_counter()
        for n in range(count):
            DOC["n"] = n
            publisher.send_json(DOC, KIND)
        elapsed = time.perf_counter() - started
        close(publisher)
        return count / elapsed
    finally:
        delete_queue(queue)


def send_batch_run(count: int) -> float:
    queue = f"bench-batch-{uuid.uuid4().hex[:8]}"
    try:
        publisher = Publisher.from_config(config(queue))
        data = payloads(count)
        started = time.perf_counter()
        for start in range(0, count, 500):
            publisher.send_batch(data[start : start + 500])
        elapsed = time.perf_counter() - started
        close(publisher)
        return count / elapsed
    finally:
        delete_queue(queue)


def poll_run(count: int) -> float:
    queue = f"bench-poll-{uuid.uuid4().hex[:8]}"
    try:
        fill(config(queue), count)
        started = time.perf_counter()
        seen = drain(config(queue), count)
        elapsed = time.perf_counter() - started
        if seen != count:
            sys.exit(f"polled {seen} of {count}")
        return count / elapsed
    finally:
        delete_queue(queue)


SCENARIOS = {
    "route": (route_run, 20_000),
    "send-json": (send_json_run, 3_000),
    "send-batch": (send_batch_run, 20_000),
    "poll": (poll_run, 20_000),
}


if __name__ == "__main__":
    run_scenarios(__doc__, SCENARIOS)
