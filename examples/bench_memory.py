"""Memory benchmark: messages per second through a route, in one process, no server.

    python examples/bench_memory.py --messages 100000

A publisher sends JSON messages into a memory topic; a route passes each through a raw
Python handler into a second topic, which a `MemoryDrainer` empties. The time runs from
the first send until the last message is drained. (`bench/mq_bridge_memory.py` has more
scenarios and compares with the peer library.)
"""

from __future__ import annotations

import argparse
import time

from mq_bridge import MemoryDrainer, Message, Publisher, Route


def handle(message: Message) -> Message:
    return message


def run(count: int, batch_size: int) -> float:
    capacity = count + 1  # room for everything: the benchmark measures the route, not waits
    route = Route.from_config(
        {
            "input": {"memory": {"topic": "bench.in", "capacity": capacity}},
            "output": {"memory": {"topic": "bench.out", "capacity": capacity}},
            "batch_size": batch_size,
        }
    ).with_handler(handle)
    publisher = Publisher.from_config({"memory": {"topic": "bench.in", "capacity": capacity}})
    drainer = MemoryDrainer.from_topic("bench.out", capacity)
    document = {"order_id": 0, "customer": "c-000042", "amount": 129.95, "currency": "EUR"}
    with route:
        started = time.perf_counter()
        for number in range(count):
            document["order_id"] = number
            publisher.send_json(document, {"kind": "order.created"})
        drained = drainer.drain(count, timeout=120.0)
        seconds = time.perf_counter() - started
    if drained != count:
        raise SystemExit(f"only {drained} of {count} messages came through")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=512)
    args = parser.parse_args()
    seconds = run(args.messages, args.batch_size)
    print(f"{args.messages:,} messages in {seconds:.3f} s: "
          f"{args.messages / seconds:,.0f} msg/s through a memory route")  # fmt: skip


if __name__ == "__main__":
    main()
