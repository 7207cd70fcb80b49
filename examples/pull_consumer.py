"""Pull-based consumer: `poll`/`commit`, then `poll_batch`/`ack`, over a file endpoint.

    python examples/pull_consumer.py [DIRECTORY]

A publisher writes orders to a JSON-lines file; a `Consumer` in ``consume`` mode reads it
from the start and sets `exhausted` once everything is read (a bounded source). The first
loop commits after each handled batch (at-least-once). The second reads a file through a
consumer group with per-batch tokens: it acks the batches it stored and nacks one, which
then comes again, and its progress survives a restart (a new consumer resumes after it).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from mq_bridge import Consumer, Publisher


def write_orders(path: Path, count: int) -> None:
    with Publisher.from_config({"file": {"path": str(path), "format": "json"}}) as publisher:
        for order_id in range(count):
            publisher.send_json({"order_id": order_id, "amount": 10 + order_id})


def poll_and_commit(path: Path) -> None:
    total = 0
    with Consumer.from_config({"file": {"path": str(path), "format": "json"}}) as consumer:
        while not consumer.exhausted:
            batch = consumer.poll(max=100, timeout_ms=1000)  # [] on timeout
            if not batch:
                continue
            total += sum(message.json()["amount"] for message in batch)
            consumer.commit()  # ack only after handling
    print(f"poll/commit: the amounts add up to {total}")


def poll_batch_and_ack(path: Path) -> None:
    config = {"file": {"path": str(path), "format": "json", "mode": "group_subscribe",
                       "group_id": "loader"}}  # fmt: skip
    stored: list[int] = []
    with Consumer.from_config(config) as consumer:
        refused_once = False
        while len(stored) < 150:
            messages, token = consumer.poll_batch(max=50, timeout_ms=1000)
            if token is None:
                break  # nothing more for now
            if not refused_once:  # pretend the first load failed: release it for redelivery
                consumer.nack(token)
                refused_once = True
                continue
            stored += [message.json()["order_id"] for message in messages]
            consumer.ack(token)  # just this batch
    print(f"poll_batch/ack: stored orders {stored[0]}..{stored[-1]} ({len(stored)}), "
          "the nacked batch came again")  # fmt: skip
    with Consumer.from_config(config) as consumer:  # a restart resumes after the acks
        messages, token = consumer.poll_batch(max=1, timeout_ms=1000)
        print(f"after a restart the group resumes at order {messages[0].json()['order_id']}")
        consumer.nack(token)


def main() -> None:
    directory = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp())
    orders = directory / "orders.jsonl"
    write_orders(orders, 200)
    poll_and_commit(orders)
    poll_batch_and_ack(orders)


if __name__ == "__main__":
    main()
