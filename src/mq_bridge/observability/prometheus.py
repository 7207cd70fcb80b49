"""``/metrics`` in the Prometheus text format: routes, endpoints, twainmq stores.

Collectors read the live figures at scrape time (the route runner's `RouteCounters`,
the ``metrics`` middleware's series, a store's files), so nothing on a route's hot path
touches prometheus-client, and ``metrics_snapshot()`` and ``/metrics`` cannot disagree:
they read the same counters. docs/metrics.md lists every series.

    registry = metrics_registry(store_roots=["/var/lib/twain"])
    server = serve_metrics(9464, registry=registry)      # GET http://127.0.0.1:9464/metrics
    ...
    server.shutdown()

Needs the ``metrics`` extra (``pip install 'twainmq[metrics]'``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from mq_bridge.observability.counters import STAGES, RouteCounters, all_route_counters
from mq_bridge.observability.store_stats import describe_groups, describe_topics, open_read_only

__all__ = [
    "BridgeCollector",
    "StoreCollector",
    "metrics_registry",
    "render_metrics",
    "serve_metrics",
]

_log = logging.getLogger("mq_bridge.metrics")


def _prometheus() -> Any:
    try:
        from prometheus_client import core
    except ImportError as error:
        from mq_bridge.errors import ConfigError

        raise ConfigError(
            "/metrics needs the prometheus-client package: pip install 'twainmq[metrics]'",
            path="metrics",
        ) from error
    return core


class BridgeCollector:
    """Every route of this process: the runner's counters, its endpoints' status, and the
    series of each ``metrics`` middleware."""

    def collect(self) -> Iterator[Any]:
        core = _prometheus()
        routes = all_route_counters()
        yield from _route_families(core, routes)
        yield from _endpoint_families(core, routes)
        yield from _middleware_families(core)

    def describe(self) -> list[Any]:
        return []  # collected at scrape time only (names depend on nothing at registration)


def _route_families(core: Any, routes: Sequence[RouteCounters]) -> Iterator[Any]:
    messages = core.CounterMetricFamily(
        "mq_bridge_route_messages",
        "Messages of a route by stage (received, handled, sent, acked, nacked, retried, "
        "dropped, dead_lettered).",
        labels=["route", "stage"],
    )
    errors = core.CounterMetricFamily(
        "mq_bridge_route_errors", "Messages whose handler or send failed (each attempt).",
        labels=["route"],
    )  # fmt: skip
    in_flight = core.GaugeMetricFamily(
        "mq_bridge_route_in_flight_messages",
        "Messages received and not yet acked or nacked.",
        labels=["route"],
    )
    up = core.GaugeMetricFamily("mq_bridge_route_up", "1 while the route runs.", labels=["route"])
    healthy = core.GaugeMetricFamily(
        "mq_bridge_route_healthy",
        "1 while the route runs and delivers; 0 while its output holds messages it cannot "
        "deliver (a broker away, a failing message) or its input reconnects.",
        labels=["route"],
    )
    handler = core.HistogramMetricFamily(
        "mq_bridge_route_handler_seconds",
        "Time the handler took over one batch.",
        labels=["route"],
    )
    batches = core.HistogramMetricFamily(
        "mq_bridge_route_batch_size", "Messages per batch received.", labels=["route"]
    )
    for counters in routes:
        totals = counters.totals()
        route = counters.route
        for stage in STAGES:
            messages.add_metric([route, stage], totals[stage])
        errors.add_metric([route], totals["errors"])
        in_flight.add_metric([route], totals["in_flight"])
        up.add_metric([route], 1.0 if counters.running else 0.0)
        healthy.add_metric([route], 1.0 if counters.running and counters.healthy else 0.0)
        handler.add_metric([route], *_buckets(totals["handler_seconds"]))
        batches.add_metric([route], *_buckets(totals["batch_size"]))
    yield from (messages, errors, in_flight, up, healthy, handler, batches)


def _buckets(histogram: dict[str, Any]) -> tuple[list[tuple[str, float]], float]:
    buckets = [
        ("+Inf" if bound == float("inf") else _bound(bound), float(count))
        for bound, count in histogram["buckets"]
    ]
    return buckets, float(histogram["sum"])


def _bound(bound: float) -> str:
    return repr(float(bound))


def _endpoint_families(core: Any, routes: Sequence[RouteCounters]) -> Iterator[Any]:
    labels = ["route", "side", "endpoint"]
    up = core.GaugeMetricFamily(
        "mq_bridge_endpoint_up", "1 when the endpoint's status is healthy.", labels=labels
    )
    pending = core.GaugeMetricFamily(
        "mq_bridge_endpoint_pending_messages",
        "Messages waiting at the endpoint (its lag), where the endpoint can tell.",
        labels=labels,
    )
    reconnects = core.CounterMetricFamily(
        "mq_bridge_endpoint_reconnects", "Times the route reconnected the endpoint.",
        labels=labels,
    )  # fmt: skip
    for counters in routes:
        for side, endpoint in counters.endpoints().items():
            target = _describe(endpoint)
            key = [counters.route, side, target]
            reconnects.add_metric(key, counters.reconnects[side])
            status = _status(endpoint)
            if status is None:
                continue
            up.add_metric(key, 1.0 if status.healthy else 0.0)
            if status.pending is not None:
                pending.add_metric(key, float(status.pending))
    yield from (up, pending, reconnects)


def _describe(endpoint: Any) -> str:
    try:
        return str(endpoint.describe())
    except Exception:
        return type(endpoint).__name__


def _status(endpoint: Any) -> Any:
    try:
        return endpoint.status()
    except Exception as error:  # a scrape must not fail on one endpoint
        _log.debug("status of %r failed: %r", endpoint, error)
        return None


def _middleware_families(core: Any) -> Iterator[Any]:
    from mq_bridge.middleware.metrics import METRICS  # pydantic: only with a metrics scrape

    labels = ["route", "side", "endpoint"]
    messages = core.CounterMetricFamily(
        "mq_bridge_endpoint_messages",
        "Messages through a metrics middleware, by outcome (messages, acked, nacked, failed).",
        labels=[*labels, "outcome"],
    )
    batches = core.CounterMetricFamily(
        "mq_bridge_endpoint_batches", "Batches through a metrics middleware.", labels=labels
    )
    latency = core.SummaryMetricFamily(
        "mq_bridge_endpoint_latency_seconds",
        "Output: time of one send; input: time from a batch handed out to its ack or nack.",
        labels=labels,
    )
    for (route, side, endpoint), series in METRICS.series_items():
        figures = series.as_dict()
        key = [route, side, endpoint]
        for outcome, value in figures.items():
            if outcome not in ("latency_ms", "batches"):
                messages.add_metric([*key, outcome], value)
        batches.add_metric(key, figures["batches"])
        with series.lock:
            count, total = series.latency.count, series.latency.total
        latency.add_metric(key, count_value=count, sum_value=total)
    yield from (messages, batches, latency)


class StoreCollector:
    """A twainmq store's topics, partitions and consumer groups (read-only, at scrape)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        core = _prometheus()
        store = open_read_only(self.root)
        topics = describe_topics(store)
        yield from _partition_families(core, str(self.root), topics)
        ends = {row.name: row.end_offsets for row in topics if row.description is not None}
        yield from _group_families(core, str(self.root), describe_groups(store, ends))


def _partition_families(core: Any, root: str, topics: Iterable[Any]) -> Iterator[Any]:
    labels = ["store", "topic", "partition"]
    families = {
        "end": core.GaugeMetricFamily(
            "twainmq_partition_end_offset", "Offset of the next message written.", labels=labels
        ),
        "start": core.GaugeMetricFamily(
            "twainmq_partition_start_offset", "Oldest offset kept.", labels=labels
        ),
        "bytes": core.GaugeMetricFamily(
            "twainmq_partition_bytes", "Bytes of the partition's segments.", labels=labels
        ),
        "segments": core.GaugeMetricFamily(
            "twainmq_partition_segments", "Segment files of the partition.", labels=labels
        ),
    }
    for row in topics:
        if row.description is None:
            continue
        for p in row.description.partitions:
            key = [root, row.name, str(p.partition)]
            families["end"].add_metric(key, p.end_offset)
            families["start"].add_metric(key, p.start_offset)
            families["bytes"].add_metric(key, p.bytes)
            families["segments"].add_metric(key, len(p.segments))
    yield from families.values()


def _group_families(core: Any, root: str, groups: Iterable[Any]) -> Iterator[Any]:
    labels = ["store", "topic", "group"]
    members = core.GaugeMetricFamily(
        "twainmq_group_members", "Members whose process is alive.", labels=labels
    )
    generation = core.GaugeMetricFamily(
        "twainmq_group_generation", "The group's generation.", labels=labels
    )
    committed = core.GaugeMetricFamily(
        "twainmq_group_committed_offset",
        "Committed offset (next to read) per partition; absent before the first commit.",
        labels=[*labels, "partition"],
    )
    lag = core.GaugeMetricFamily(
        "twainmq_group_lag_messages",
        "Messages after the committed offset, per partition.",
        labels=[*labels, "partition"],
    )
    for row in groups:
        if row.description is None:
            continue
        key = [root, row.topic, row.group]
        members.add_metric(key, row.live_members)
        generation.add_metric(key, row.description.generation)
        for partition, progress in row.description.partitions.items():
            if progress.committed is not None:
                committed.add_metric([*key, str(partition)], progress.committed)
            lag.add_metric([*key, str(partition)], progress.lag)
    yield from (members, generation, committed, lag)


def metrics_registry(store_roots: Sequence[str | Path] = (), routes: bool = True) -> Any:
    """A prometheus-client registry with this process's routes and the stores at
    `store_roots` (a private registry: the global default one is left alone)."""
    _prometheus()  # first: without prometheus-client, the error that names the extra
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    if routes:
        registry.register(BridgeCollector())
    for root in store_roots:
        registry.register(StoreCollector(root))
    return registry


def render_metrics(registry: Any) -> tuple[bytes, str]:
    """The registry's metrics in the text format, and the content type to serve them with."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return generate_latest(registry), CONTENT_TYPE_LATEST


def serve_metrics(port: int, host: str = "127.0.0.1", registry: Any = None) -> Any:
    """Serve ``/metrics`` on a daemon thread; returns the server (``shutdown()`` stops it,
    ``server_port`` is the port actually bound, for port 0)."""
    _prometheus()
    from prometheus_client import start_http_server

    server, _thread = start_http_server(port, host, registry or metrics_registry())
    return server
