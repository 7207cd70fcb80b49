from __future__ import annotations

import pytest

from mq_bridge.errors import NonRetryableError, SendError
from mq_bridge.middleware import metrics
from mq_bridge.middleware.metrics import METRICS, Latency, MetricsOptions, metrics_snapshot

from .endpoints import ListInput, ListOutput, context_with, numbered


@pytest.fixture(autouse=True)
def fresh_registry():
    METRICS.reset()
    yield
    METRICS.reset()


def test_output_counts_messages_failures_and_latency():
    output = ListOutput(lambda m, a: NonRetryableError("x") if m.json()["n"] == 0 else None)
    wrapped = metrics.wrap_output(output, MetricsOptions(), context_with({}))
    wrapped.send(numbered(3)[1:])
    with pytest.raises(SendError):
        wrapped.send(numbered(4))
    figures = metrics_snapshot()["orders"]["output"]["list-output"]
    assert (figures["messages"], figures["batches"], figures["failed"]) == (6, 2, 1)
    assert figures["latency_ms"]["count"] == 2
    assert figures["latency_ms"]["max"] >= figures["latency_ms"]["mean"] > 0


def test_input_counts_handed_out_acked_and_nacked():
    source = ListInput(numbered(5))
    wrapped = metrics.wrap_input(source, MetricsOptions(), context_with({}))
    wrapped.ack(wrapped.receive(3, 0))
    wrapped.nack(wrapped.receive(3, 0))
    figures = metrics_snapshot()["orders"]["input"]["list-input"]
    assert (figures["messages"], figures["batches"]) == (5, 2)
    assert (figures["acked"], figures["nacked"]) == (3, 2)
    assert figures["latency_ms"]["count"] == 2
    assert len(source.acked) == 3 and len(source.nacked) == 2


def test_quantiles_are_bucket_bounds_near_the_samples():
    latency = Latency()
    for _ in range(99):
        latency.record(0.001)
    latency.record(0.5)
    figures = latency.as_dict()
    assert 1.0 <= figures["p50"] <= 1.25
    assert figures["p99"] <= 1.25 and figures["max"] == 500.0


def test_equal_routes_and_endpoints_share_one_series_and_reset_clears():
    for _ in range(2):
        metrics.wrap_output(ListOutput(), MetricsOptions(), context_with({})).send(numbered(2))
    assert metrics_snapshot()["orders"]["output"]["list-output"]["messages"] == 4
    METRICS.reset()
    assert metrics_snapshot() == {}
