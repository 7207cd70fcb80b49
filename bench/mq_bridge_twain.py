"""Benchmark: the `twain` endpoint through the public API (no peer has this endpoint).

Four figures, ~100 B JSON messages with one metadata key, a 4-partition topic:

- single:  `Publisher.send_json` one message at a time
- batch:   `Publisher.send_batch` of 1000 messages
- read:    `Consumer.poll(max=500)` + `commit()` through a consumer group, touching payloads
- route:   a `Route` twain -> handler (returns the message) -> twain, until the output has all
- route100: the same with ``commit_interval_ms: 100`` (commits at most 10 times a second)
- route_eos: the route with ``exactly_once_output`` (exactly-once; commits per batch)

Run::

    .venv/bin/python bench/mq_bridge_twain.py [--messages N] [--runs 3]

Prints one line per run and the medians.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from mq_bridge import Consumer, Message, Publisher, Route
from twainmq import Twain


def order(number: int) -> dict[str, Any]:
    return {"order_id": number, "customer": f"c-{number % 100}", "amount": 12.5, "n": number}


def endpoint(root: Path, topic: str, **options: Any) -> dict[str, Any]:
    create = {"partitions": 4}
    return {"twain": {"root": str(root), "topic": topic, "create": create, **options}}


def write_single(root: Path, count: int) -> float:
    with Publisher.from_config(endpoint(root, "single")) as publisher:
        started = time.perf_counter()
        for number in range(count):
            publisher.send_json(order(number), {"kind": "order.created"})
    return count / (time.perf_counter() - started)


def write_batches(root: Path, count: int) -> float:
    messages = [Message.from_json(order(n), {"kind": "order.created"}) for n in range(count)]
    with Publisher.from_config(endpoint(root, "batch")) as publisher:
        started = time.perf_counter()
        for start in range(0, count, 1000):
            publisher.send_batch(messages[start : start + 1000])
    return count / (time.perf_counter() - started)


def read(root: Path, count: int) -> float:
    config = endpoint(root, "batch", group="bench")
    with Consumer.from_config(config) as consumer:
        received = size = 0
        started = time.perf_counter()
        while received < count:
            batch = consumer.poll(max=500, timeout_ms=2000)
            if not batch:
                raise SystemExit(f"read {received} of {count} messages")
            for message in batch:
                size += len(message.payload)
            received += len(batch)
            consumer.commit()
        return count / (time.perf_counter() - started)


def route(root: Path, count: int, commit_interval_ms: int = 0, exactly_once: bool = False) -> float:
    name = f"route{commit_interval_ms}{'eos' if exactly_once else ''}"
    options: dict[str, Any] = {"exactly_once_output": name} if exactly_once else {}
    config = {
        "input": endpoint(
            root, "batch", group=name, commit_interval_ms=commit_interval_ms, **options
        ),
        "output": endpoint(root, name),
        "batch_size": 512,
    }
    store = Twain(root)
    started = time.perf_counter()
    with Route.from_config(config, name).with_handler(lambda message: message):
        while sum(store.end_offsets(name).values()) < count:
            time.sleep(0.001)
    return count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    names = ("single", "batch", "read", "route", "route100", "route_eos")
    figures: dict[str, list[float]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as directory:
        for run in range(args.runs):
            root = Path(directory) / f"run{run}"
            figures["single"].append(write_single(root, args.messages))
            figures["batch"].append(write_batches(root, args.messages))
            figures["read"].append(read(root, args.messages))
            figures["route"].append(route(root, args.messages))
            figures["route100"].append(route(root, args.messages, commit_interval_ms=100))
            figures["route_eos"].append(route(root, args.messages, exactly_once=True))
            line = ", ".join(f"{name} {values[-1]:,.0f}" for name, values in figures.items())
            print(f"run {run}: {line} msg/s")
    medians = ", ".join(f"{name} {statistics.median(v):,.0f}" for name, v in figures.items())
    print(f"median of {args.runs} ({args.messages:,} messages): {medians} msg/s")


if __name__ == "__main__":
    main()
