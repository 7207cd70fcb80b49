"""The `twain` endpoint through the config-file forms of the seed README."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from mq_bridge import Consumer, Message, Publisher, Route


def write_config(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    config = tmp_path / "bridge.yaml"
    config.write_text(
        f"""
publishers:
  orders:
    twain: {{root: "{root}", topic: orders, key_from: customer,
             create: {{partitions: 3, key_type: char32}}}}
consumers:
  enriched:
    twain: {{root: "{root}", topic: enriched, group: audit, create: {{partitions: 2}}}}
routes:
  enrich:
    input:
      twain: {{root: "{root}", topic: orders, create: {{partitions: 3, key_type: char32}}}}
    output:
      twain: {{root: "{root}", topic: enriched, fsync: batch, create: {{partitions: 2}}}}
    batch_size: 64
    concurrency: 4
"""
    )
    return config


def test_publisher_route_and_consumer_from_one_yaml_file(tmp_path: Path) -> None:
    config = str(write_config(tmp_path))
    total = 1000
    with Publisher.from_file(config, "orders") as publisher:
        for number in range(total):
            publisher.send_json({"n": number}, {"customer": f"c{number % 7}"})
    got: list[Message] = []
    route = Route.from_file(config, "enrich").with_handler(lambda m: {"n": m.json()["n"] * 2})
    with route, Consumer.from_file(config, "enriched") as consumer:
        deadline = time.monotonic() + 30
        while len(got) < total and time.monotonic() < deadline:
            got += consumer.poll(max=500, timeout_ms=200)
            consumer.commit()
        assert consumer.status()["pending"] == 0
    assert sorted(m.json()["n"] for m in got) == [2 * n for n in range(total)]
    assert Counter(m.metadata["customer"] for m in got) == Counter(
        f"c{n % 7}" for n in range(total)
    )
