"""/metrics scraped while routes run: every series, with the values the test sent."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mq_bridge import MemoryDrainer, NonRetryableError, Publisher, RetryableError, Route
from mq_bridge.observability.prometheus import metrics_registry, serve_metrics
from tests.helpers import wait_until
from tests.mq_bridge.helpers import unique
from twainmq import Twain

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    text = urllib.request.urlopen(url, timeout=30).read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


@pytest.fixture
def metrics_url(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    store = tmp_path / "store"
    Twain(store)
    server = serve_metrics(0, "127.0.0.1", metrics_registry([store]))
    try:
        yield f"http://127.0.0.1:{server.server_port}/metrics", store
    finally:
        server.shutdown()
        server.server_close()


class Handler:
    """n % 5 == 0 fails for good (dead-lettered), n % 7 == 0 is filtered out (None),
    n == 3 fails retriably once."""

    def __init__(self) -> None:
        self.failed_once = False
        self.lock = threading.Lock()

    def __call__(self, message: Any) -> Any:
        n = message.json()["n"]
        if n % 5 == 0:
            raise NonRetryableError(f"bad {n}")
        if n == 3:
            with self.lock:
                if not self.failed_once:
                    self.failed_once = True
                    raise RetryableError("try again")
        return None if n % 7 == 0 else message


def _route(name: str, source: str, sink: str, dead: str | None) -> Route:
    output: dict[str, Any] = {"memory": {"topic": sink}}
    if dead is not None:
        endpoint = {"memory": {"topic": dead}, "middlewares": [{"metrics": {}}]}
        output["middlewares"] = [{"dlq": {"endpoint": endpoint}}]
    config = {
        "routes": {
            name: {
                "input": {"memory": {"topic": source}, "middlewares": [{"metrics": {}}]},
                "output": output,
                "batch_size": 8,
            }
        }
    }
    return Route.from_config(config, name)


def test_metrics_show_every_route_series_with_the_values_sent(
    metrics_url: tuple[str, Path],
) -> None:
    url, _ = metrics_url
    kept, lossy = unique("kept"), unique("lossy")
    source, sink, dead = unique("in"), unique("out"), unique("dead")
    source2, sink2 = unique("in"), unique("out")

    def drop_fours(message: Any) -> Any:
        if message.json()["n"] % 4 == 0:
            raise NonRetryableError("dropped on purpose")
        return message

    first = _route(kept, source, sink, dead).with_handler(Handler())
    second = _route(lossy, source2, sink2, None).with_handler(drop_fours)
    with first, second:
        publisher = Publisher.from_config({"memory": {"topic": source}})
        for n in range(50):
            publisher.send_json({"n": n})
        publisher2 = Publisher.from_config({"memory": {"topic": source2}})
        for n in range(20):
            publisher2.send_json({"n": n})
        assert MemoryDrainer.from_topic(sink).drain(34, 30) == 34
        assert MemoryDrainer.from_topic(dead).drain(10, 30) == 10
        assert MemoryDrainer.from_topic(sink2).drain(15, 30) == 15

        def acked(route: str, count: int) -> bool:
            samples = scrape(url)
            key = ("mq_bridge_route_messages_total", (("route", route), ("stage", "acked")))
            return samples.get(key) == count

        assert wait_until(lambda: acked(kept, 50) and acked(lossy, 20))
        samples = scrape(url)  # while both routes still run

    expected = {
        kept: {"received": 50, "handled": 40, "sent": 34, "acked": 50, "nacked": 0,
               "retried": 1, "dropped": 0, "dead_lettered": 10},
        lossy: {"received": 20, "handled": 15, "sent": 15, "acked": 20, "nacked": 0,
                "retried": 0, "dropped": 5, "dead_lettered": 0},
    }  # fmt: skip
    for route, stages in expected.items():
        for stage, count in stages.items():
            assert value(samples, "mq_bridge_route_messages_total", route=route, stage=stage) == (
                count
            ), (route, stage)
        assert value(samples, "mq_bridge_route_in_flight_messages", route=route) == 0
        assert value(samples, "mq_bridge_route_up", route=route) == 1
        assert value(samples, "mq_bridge_route_healthy", route=route) == 1  # all settled
        assert value(samples, "mq_bridge_route_batch_size_sum", route=route) == (stages["received"])
        batches = value(samples, "mq_bridge_route_batch_size_count", route=route)
        assert batches >= stages["received"] / 8
        handler_count = value(samples, "mq_bridge_route_handler_seconds_count", route=route)
        assert handler_count >= batches  # once per batch, again per retry
        assert (
            value(samples, "mq_bridge_route_handler_seconds_bucket", route=route, le="+Inf")
            == handler_count
        )
    assert value(samples, "mq_bridge_route_errors_total", route=kept) == 1  # the retriable one
    assert value(samples, "mq_bridge_route_errors_total", route=lossy) == 5

    endpoint = {"route": kept, "side": "input", "endpoint": f"memory:{source}"}
    assert value(samples, "mq_bridge_endpoint_up", **endpoint) == 1
    assert value(samples, "mq_bridge_endpoint_pending_messages", **endpoint) == 0
    assert value(samples, "mq_bridge_endpoint_reconnects_total", **endpoint) == 0
    assert value(samples, "mq_bridge_endpoint_messages_total", outcome="acked", **endpoint) == 50
    output = {"route": kept, "side": "output", "endpoint": f"memory:{dead}"}
    assert value(samples, "mq_bridge_endpoint_messages_total", outcome="messages", **output) == 10


def test_metrics_show_a_stores_partitions_and_groups(metrics_url: tuple[str, Path]) -> None:
    url, root = metrics_url
    store = Twain(root)
    store.create_topic("orders", partitions=3)
    with store.producer("orders") as producer:
        for n in range(30):
            producer.write_message(0, f"order {n}", partition=n % 3)
    consumer = store.consumer("orders", group="billing")
    try:
        assert len(consumer.poll_many(12, timeout=5)) == 12
        consumer.commit()
        samples = scrape(url)
        committed = consumer.committed()
    finally:
        consumer.close()

    described = store.describe_topic("orders")
    labels = {"store": str(root), "topic": "orders"}
    for info in described.partitions:
        where = {**labels, "partition": str(info.partition)}
        assert value(samples, "twainmq_partition_end_offset", **where) == info.end_offset == 10
        assert value(samples, "twainmq_partition_start_offset", **where) == info.start_offset
        assert value(samples, "twainmq_partition_bytes", **where) == info.bytes > 0
        assert value(samples, "twainmq_partition_segments", **where) == len(info.segments)
    group = {**labels, "group": "billing"}
    assert value(samples, "twainmq_group_members", **group) == 1  # the consumer above
    assert value(samples, "twainmq_group_generation", **group) >= 1
    total_lag = 0.0
    for partition, offset in committed.items():
        where = {**group, "partition": str(partition)}
        assert value(samples, "twainmq_group_committed_offset", **where) == offset
        lag = value(samples, "twainmq_group_lag_messages", **where)
        assert lag == 10 - offset
        total_lag += lag
    assert total_lag == 30 - 12
