"""Benchmark: the `file` endpoint through the public API (Publisher then Consumer).

Writes N messages (~100 B JSON, one metadata key) one `Publisher.send_json` at a time
(each written before it returns), then in `Publisher.send_batch` calls of 500, then reads
them back with `Consumer.poll(max=500)` + `commit()`, touching each payload.
Uses only the public API, so the same script measures a peer::

    .venv/bin/python bench/mq_bridge_file.py
    "$(scripts/peer-venv.sh mq-bridge)" bench/mq_bridge_file.py

Prints one line per run and the medians of `--runs` runs.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from mq_bridge import Consumer, Message, Publisher


def write(path: str, fmt: str, count: int) -> float:
    """Messages per second for `count` single sends."""
    publisher = Publisher.from_config({"file": {"path": path, "format": fmt}})
    started = time.perf_counter()
    for number in range(count):
        publisher.send_json(
            {"order_id": number, "customer": f"c-{number % 100}", "amount": 12.5, "n": number},
            {"kind": "order.created"},
        )
    if hasattr(publisher, "close"):
        publisher.close()
    else:  # mq-bridge closes on collection
        del publisher
    return count / (time.perf_counter() - started)


def write_batches(path: str, fmt: str, count: int, size: int = 500) -> float:
    """Messages per second for `count` messages sent `size` at a time with `send_batch`."""
    publisher = Publisher.from_config({"file": {"path": path, "format": fmt}})
    batches = [
        [
            Message.from_json(
                {"order_id": n, "customer": f"c-{n % 100}", "amount": 12.5, "n": n},
                {"kind": "order.created"},
            )
            for n in range(start, min(count, start + size))
        ]
        for start in range(0, count, size)
    ]
    started = time.perf_counter()
    for batch in batches:
        publisher.send_batch(batch)
    if hasattr(publisher, "close"):
        publisher.close()
    else:  # mq-bridge closes on collection
        del publisher
    return count / (time.perf_counter() - started)


def read(path: str, fmt: str, count: int) -> float:
    """Messages per second reading `count` messages back, touching every payload."""
    consumer = Consumer.from_config({"file": {"path": path, "format": fmt, "mode": "consume"}})
    received = size = 0
    started = time.perf_counter()
    while received < count:
        batch = consumer.poll(max=500, timeout_ms=2000)
        if not batch:
            break
        for message in batch:
            size += len(message.payload)
        received += len(batch)
        consumer.commit()
    elapsed = time.perf_counter() - started
    if received != count:
        raise SystemExit(f"read {received} of {count} messages")
    return count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--format", default="normal", help="normal | json | text | raw")
    args = parser.parse_args()
    writes, batched, reads = [], [], []
    with tempfile.TemporaryDirectory() as directory:
        for run in range(args.runs):
            path = str(Path(directory) / f"run{run}" / "orders.log")
            writes.append(write(path, args.format, args.messages))
            reads.append(read(path, args.format, args.messages))
            batch_path = str(Path(directory) / f"run{run}" / "batches.log")
            batched.append(write_batches(batch_path, args.format, args.messages))
            print(
                f"run {run}: write {writes[-1]:,.0f} msg/s, send_batch(500) "
                f"{batched[-1]:,.0f} msg/s, read {reads[-1]:,.0f} msg/s"
            )
    print(
        f"median of {args.runs} ({args.format}, {args.messages:,} messages): "
        f"write {statistics.median(writes):,.0f} msg/s, "
        f"send_batch(500) {statistics.median(batched):,.0f} msg/s, "
        f"read {statistics.median(reads):,.0f} msg/s"
    )


if __name__ == "__main__":
    main()
