"""A durable pipeline on the `twain` endpoint: orders -> enrich -> orders.enriched.

    python examples/durable_pipeline.py [STORE_DIRECTORY]

Everything lives in one directory (a fresh temporary one by default): the config
`durable_pipeline.yaml` beside this file takes it from ``$TWAINMQ_ROOT``. The script
publishes orders, runs the route until every order is through, reads the enriched orders
back with a pull consumer, then publishes more and runs the route again: the route's
consumer group resumes where it committed, so only the new orders are handled (and the
reading group `report` resumes too, so it sees only the new results).

The same route runs from the shell with the handler below:

    mq-bridge run examples/durable_pipeline.yaml \\
        --handler examples/durable_pipeline.py:enrich --stop-when-idle 1
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from mq_bridge import Consumer, Message, Publisher, Route

CONFIG = str(Path(__file__).with_name("durable_pipeline.yaml"))


def enrich(message: Message) -> Message:
    """Add the order's total and a size tier."""
    order = message.json()
    order["total_cents"] = order["quantity"] * order["unit_price_cents"]
    order["tier"] = "large" if order["total_cents"] >= 10_000 else "small"
    return message.with_json(order)


def publish(first: int, count: int) -> None:
    with Publisher.from_file(CONFIG, "orders") as publisher:
        publisher.send_batch(
            Message.from_json({"order_id": n, "quantity": 1 + n % 4, "unit_price_cents": 990 * n})
            for n in range(first, first + count)
        )


def run_and_collect(expected: int) -> list[dict[str, int]]:
    """Run the route while a pull consumer reads its output; stop once `expected` came."""
    orders: list[dict[str, int]] = []
    deadline = time.monotonic() + 60
    with (
        Route.from_file(CONFIG, "enrich").with_handler(enrich),
        Consumer.from_file(CONFIG, "enriched") as consumer,
    ):
        while len(orders) < expected and time.monotonic() < deadline:
            batch = consumer.poll(max=500, timeout_ms=500)
            orders += [message.json() for message in batch]
            consumer.commit()  # the `report` group's progress: read again, it resumes here
    return orders


def main() -> None:
    root = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="durable-pipeline-")
    os.environ["TWAINMQ_ROOT"] = root
    publish(0, 1000)
    first = run_and_collect(1000)
    large = sum(order["tier"] == "large" for order in first)
    print(f"first run: {len(first)} orders enriched ({large} large) in {root}")
    publish(1000, 200)
    second = run_and_collect(200)
    print(f"second run: {len(second)} new orders enriched; the group resumed after its commit")
    print(f"inspect: twainmq --root {root} describe orders.enriched")


if __name__ == "__main__":
    main()
