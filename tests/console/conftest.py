"""A small twainmq store with topics, messages and a consumer group, and a console over it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mq_bridge.console import ConsoleServer, ConsoleSettings
from tests.console.browser import browser  # noqa: F401 - the headless Chromium fixture
from twainmq import Twain

#: Messages written to each partition of "orders" (3 partitions) and "audit" (1).
ORDERS_PER_PARTITION = 45
AUDIT_MESSAGES = 7
#: Messages the "billing" group consumed and committed.
BILLING_COMMITTED = 30


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    store = Twain(root)
    store.create_topic("orders", partitions=3, retention_bytes=10_000_000)
    store.create_topic("audit", key_type="char8")
    with store.producer("orders") as producer:
        for n in range(ORDERS_PER_PARTITION * 3):
            producer.write_message(n, f"order {n}", partition=n % 3)
    with store.producer("audit") as producer:
        for n in range(AUDIT_MESSAGES):
            producer.write_message(f"k{n}", b"\xff\x00binary" if n == 0 else f"audit {n}")
    consumer = store.consumer("orders", group="billing")
    try:
        seen = 0
        while seen < BILLING_COMMITTED:
            seen += len(consumer.poll_many(BILLING_COMMITTED - seen, timeout=5))
        consumer.commit()
    finally:
        consumer.close()  # leaves the group: no live member, so it may be reset
    return root


@pytest.fixture
def console(store_root: Path) -> Iterator[ConsoleServer]:
    settings = ConsoleSettings(store_root=store_root, allow_actions=True)
    with ConsoleServer(settings, 0) as server:
        yield server


@pytest.fixture
def read_only_console(store_root: Path) -> Iterator[ConsoleServer]:
    with ConsoleServer(ConsoleSettings(store_root=store_root), 0) as server:
        yield server
