"""Memory-endpoint throughput of mq_bridge, using only the public API of the seed.

One script measures us and the peer (mq-bridge 1.2.0 in its own venv):

    "$(scripts/peer-venv.sh mq-bridge)" bench/mq_bridge_memory.py --scenario all
    .venv/bin/python bench/mq_bridge_memory.py --scenario all

Scenarios (100k messages of ~100 B JSON by default; each figure is the median of --runs):

    route         memory -> route(with_handler returning the message) -> memory, batch 512
    route-kind    the same with add_handler(kind, fn) (JSON in, JSON out)
    route-batch1  `route` with batch_size 1
    send-json     Publisher.send_json alone into a memory topic
    poll-payload  Consumer.poll(max=500) + commit() over a filled topic, reading .payload
    poll-json     the same, calling .json()

Route scenarios time from the first send until MemoryDrainer has drained every message.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid

from mq_bridge import Consumer, MemoryDrainer, Publisher, Route

DOC = {
    "order_id": 0,
    "customer": "c-000042",
    "sku": "SKU-7731-BLUE",
    "amount": 129.95,
    "currency": "EUR",
    "n": 0,
}  # ~100 B as compact JSON


def _topics(tag: str) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"bench-{tag}-in-{suffix}", f"bench-{tag}-out-{suffix}"


def route_run(count: int, batch_size: int, by_kind: bool) -> float:
    source, sink = _topics("route")
    capacity = count + 1
    config = {
        "input": {"memory": {"topic": source, "capacity": capacity}},
        "output": {"memory": {"topic": sink, "capacity": capacity}},
        "batch_size": batch_size,
    }
    route = Route.from_config(config)
    if by_kind:
        route.add_handler("order.created", lambda data: data)
    else:
        route.with_handler(lambda message: message)
    publisher = Publisher.from_config({"memory": {"topic": source, "capacity": capacity}})
    drainer = MemoryDrainer.from_topic(sink, capacity)
    metadata = {"kind": "order.created"}
    with route:
        started = time.perf_counter()
        for n in range(count):
            DOC["n"] = n
            publisher.send_json(DOC, metadata)
        drained = drainer.drain(count, 120.0)
        elapsed = time.perf_counter() - started
    if drained != count:
        sys.exit(f"drained {drained} of {count}")
    return count / elapsed


def send_json_run(count: int) -> float:
    topic, _ = _topics("send")
    publisher = Publisher.from_config({"memory": {"topic": topic, "capacity": count + 1}})
    metadata = {"kind": "order.created"}
    started = time.perf_counter()
    for n in range(count):
        DOC["n"] = n
        publisher.send_json(DOC, metadata)
    elapsed = time.perf_counter() - started
    MemoryDrainer.from_topic(topic, count + 1).drain(count, 60.0)
    return count / elapsed


def poll_run(count: int, decode: bool) -> float:
    topic, _ = _topics("poll")
    publisher = Publisher.from_config({"memory": {"topic": topic, "capacity": count + 1}})
    for n in range(count):
        DOC["n"] = n
        publisher.send_json(DOC)
    consumer = Consumer.from_config({"memory": {"topic": topic, "capacity": count + 1}})
    seen = 0
    started = time.perf_counter()
    while seen < count:
        batch = consumer.poll(max=500, timeout_ms=1000)
        if not batch:
            break
        for message in batch:
            message.json() if decode else message.payload
        seen += len(batch)
        consumer.commit()
    elapsed = time.perf_counter() - started
    if seen != count:
        sys.exit(f"polled {seen} of {count}")
    return count / elapsed


SCENARIOS = {
    "route": lambda n: route_run(n, 512, by_kind=False),
    "route-kind": lambda n: route_run(n, 512, by_kind=True),
    "route-batch1": lambda n: route_run(n, 1, by_kind=False),
    "send-json": send_json_run,
    "poll-payload": lambda n: poll_run(n, decode=False),
    "poll-json": lambda n: poll_run(n, decode=True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", default="all", choices=[*SCENARIOS, "all"])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    for name in names:
        rates = [SCENARIOS[name](args.messages) for _ in range(args.runs)]
        print(
            f"{name:14s} median {statistics.median(rates):>12,.0f} msg/s  "
            f"runs {', '.join(f'{r:,.0f}' for r in rates)}",
            flush=True,
        )


if __name__ == "__main__":
    main()
