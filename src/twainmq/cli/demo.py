"""``twainmq demo``: a short tour of the engine in a fresh store, printing what happens.

It creates a topic, writes dataclass messages one at a time and in a batch, reads them back
without a group, then lets two members of a consumer group share the partitions and commit.
The store is kept so it can be inspected afterwards with the other commands. Phases show
their progress on stderr when it is a terminal (or with --progress).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from twainmq.cli.progress import Progress, add_progress_option
from twainmq.twain import Twain

TOPIC = "orders"
PARTITIONS = 4


@dataclass
class Order:
    """The demo's message type."""

    order_id: int
    customer: str
    amount_cents: int


def add_parsers(subparsers: Any) -> None:
    demo = subparsers.add_parser("demo", help="run a short tour in a fresh store and print it")
    demo.add_argument("-n", "--messages", type=int, default=50_000, help="messages per phase")
    add_progress_option(demo)
    demo.set_defaults(run=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    count = max(1, args.messages)
    root = tempfile.mkdtemp(prefix="twainmq-demo-")
    store = Twain(root)
    store.register_msg_cls(Order)
    store.create_topic(TOPIC, key_type="u32", partitions=PARTITIONS)
    print(f"store {root}: topic {TOPIC!r} with {PARTITIONS} partitions, u32 keys")
    _produce_one_by_one(store, count, args.progress)
    _produce_batch(store, count)
    _consume_all(store, 2 * count, args.progress)
    _share_in_a_group(store, 2 * count, args.progress)
    description = store.describe_topic(TOPIC)
    per_message = description.bytes / max(1, description.messages)
    print(
        f"on disk: {description.bytes} bytes for {description.messages} messages "
        f"({per_message:.1f} B each)"
    )
    print(f"inspect it: twainmq --root {root} describe {TOPIC}")
    return 0


def _orders(start: int, count: int) -> list[tuple[int, Order]]:
    return [
        (i % 1000, Order(i, f"customer-{i % 1000}", 100 + i % 9000))
        for i in range(start, start + count)
    ]


def _produce_one_by_one(store: Twain, count: int, wanted: bool | None) -> None:
    orders = _orders(0, count)
    progress = Progress("orders written one at a time", wanted)
    began = time.perf_counter()
    with store.producer(TOPIC) as producer:
        first = producer.write_message(*orders[0])
        for written, (key, order) in enumerate(orders[1:], start=2):
            producer.write_message(key, order)
            progress.update(written)
    progress.finish()
    _report(f"wrote {count} orders one at a time (first landed at {tuple(first)})", count, began)


def _produce_batch(store: Twain, count: int) -> None:
    orders = _orders(count, count)
    began = time.perf_counter()
    with store.producer(TOPIC) as producer:
        producer.write_messages(orders)
    _report(f"wrote {count} orders as one batch", count, began)


def _consume_all(store: Twain, expected: int, wanted: bool | None) -> None:
    progress = Progress("orders read", wanted)
    began = time.perf_counter()
    seen = 0
    with store.consumer(TOPIC) as consumer:
        first = consumer.poll()
        if first is not None:
            for seen, _ in enumerate(consumer, start=2):
                progress.update(seen)
            seen = max(seen, 1)
    progress.finish()
    _report(f"read {seen}/{expected} orders back without a group", seen, began)
    print(f"  first: {first!r}")


def _share_in_a_group(store: Twain, expected: int, wanted: bool | None) -> None:
    progress = Progress("orders read by the group", wanted)
    began = time.perf_counter()
    first = store.consumer(TOPIC, group="billing")
    second = store.consumer(TOPIC, group="billing")
    counts = [0, 0]
    idle_rounds = 0
    while idle_rounds < 3:
        idle_rounds += 1
        for index, member in enumerate((first, second)):
            batch = member.poll_many(1000, timeout=0.05)
            if batch:
                idle_rounds = 0
                counts[index] += len(batch)
                member.commit()
                progress.update(sum(counts))
    owned = (first.assignment(), second.assignment())
    first.close()
    second.close()
    progress.finish()
    _report(
        f"group 'billing': member 1 owned {owned[0]} and read {counts[0]}, member 2 owned "
        f"{owned[1]} and read {counts[1]} ({sum(counts)}/{expected}), then committed",
        sum(counts),
        began,
    )


def _report(what: str, count: int, began: float) -> None:
    seconds = time.perf_counter() - began
    print(f"{what}: {seconds:.2f} s, {count / max(seconds, 1e-9):,.0f} msg/s")
