"""metrics: count messages, failures and latency per route and endpoint, readable from Python.

Input and output. Figures go to one process-wide registry, `METRICS`; read them with
`metrics_snapshot()`::

    {"orders": {                                   # route name
        "output": {"memory:orders.out": {          # side, then the endpoint's describe()
            "messages": 1200, "batches": 3, "failed": 2,
            "latency_ms": {"count": 3, "mean": 0.8, "max": 1.2, "p50": 0.7, "p99": 1.2}}},
        "input": {"memory:orders.in": {
            "messages": 1200, "batches": 3, "acked": 1200, "nacked": 0, "failed": 0,
            "latency_ms": {...}}},
        "route": {"delivery": {"dropped": 2, "dead_lettered": 5},
                  "runner": {"received": 1200, "handled": 1200, "sent": 1198, ...}}}}

``failed`` counts, on an output, the messages a send failed (each attempt that reaches this
middleware); on an input, the receives that raised.

``route.delivery`` says what became of messages that failed for good (they are acked, so
``acked`` includes them): ``dropped`` counts those the route's error policy logged and
dropped (``runtime/delivery.py`` reports them, with or without a metrics middleware; the
key appears with the first drop); ``dead_lettered`` counts those a ``dlq`` middleware of
the route sent to its dead-letter endpoint, as seen by a metrics middleware on that
endpoint (``dlq: {endpoint: {..., middlewares: [{metrics: {}}]}}``; ``mq-bridge run``
adds it). Read them with `delivery_outcomes(route)`.

``route.runner`` holds the route runner's own counters (received, handled, sent, acked,
nacked, retried, dropped, dead_lettered, errors, in_flight), kept for every route with or
without a metrics middleware. They, the delivery outcomes above, ``/metrics`` and the
console read the same `RouteCounters` (``mq_bridge.observability.counters``): one source.

On an output, latency is the time one `send` took (for a route that includes its handler,
which runs on the output side). On an input, it is the time from handing a batch out to its
ack or nack: how long the route took to deal with it. Quantiles come from a fixed set of
buckets, so they are upper bounds accurate to the bucket (about 25%), never a sort of samples.

Options: none (``metrics: {}``).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Sequence
from typing import Any

from mq_bridge.config.declarations import Options
from mq_bridge.endpoints.base import Batch, BuildContext, InputEndpoint, OutputEndpoint
from mq_bridge.errors import SendError
from mq_bridge.message import Message
from mq_bridge.middleware.base import InputMiddleware, OutputMiddleware
from mq_bridge.observability.counters import (
    STAGES,
    all_route_counters,
    reset_route_counters,
    route_counters,
)

__all__ = [
    "METRICS",
    "OPTIONS",
    "MetricsOptions",
    "MetricsRegistry",
    "delivery_outcomes",
    "metrics_snapshot",
    "record_delivery_outcome",
    "wrap_input",
    "wrap_output",
]


class MetricsOptions(Options):
    """Counts messages, failures and latency for this endpoint; read them from Python with
    mq_bridge's metrics_snapshot()."""


OPTIONS = MetricsOptions

#: Bucket upper bounds in seconds: 10 µs to ~100 s, each 1.25x the one before.
_BOUNDS = [1e-5 * 1.25**n for n in range(73)]


class Latency:
    """A latency histogram with count, sum and max."""

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.max = 0.0
        self.buckets = [0] * (len(_BOUNDS) + 1)

    def record(self, seconds: float) -> None:
        self.count += 1
        self.total += seconds
        self.max = max(self.max, seconds)
        self.buckets[bisect.bisect_left(_BOUNDS, seconds)] += 1

    def quantile(self, fraction: float) -> float:
        """The bucket bound below which `fraction` of the samples fall (the max at the top)."""
        wanted = fraction * self.count
        seen = 0
        for index, count in enumerate(self.buckets):
            seen += count
            if seen >= wanted and count:
                return min(_BOUNDS[index], self.max) if index < len(_BOUNDS) else self.max
        return self.max

    def as_dict(self) -> dict[str, float]:
        mean = self.total / self.count if self.count else 0.0
        return {
            "count": self.count,
            "mean": mean * 1000,
            "max": self.max * 1000,
            "p50": self.quantile(0.5) * 1000,
            "p99": self.quantile(0.99) * 1000,
        }


#: The counters of each side; the "route" side holds the route's delivery outcomes.
_COUNTERS = {
    "input": ("messages", "batches", "acked", "nacked", "failed"),
    "output": ("messages", "batches", "failed"),
}
_OUTCOME_NAMES = ("dropped", "dead_lettered")
#: Metadata a `dlq` middleware puts on each dead letter: the route that failed it.
_DLQ_ROUTE = "mqb.dlq.route"


class Series:
    """The figures of one endpoint of one route, on one side."""

    def __init__(self, side: str) -> None:
        self.side = side
        self.lock = threading.Lock()
        self.counters = dict.fromkeys(_COUNTERS[side], 0)
        self.latency = Latency()

    def add(self, seconds: float | None = None, **counts: int) -> None:
        with self.lock:
            for name, count in counts.items():
                self.counters[name] += count
            if seconds is not None and self.latency is not None:
                self.latency.record(seconds)

    def as_dict(self) -> dict[str, Any]:
        with self.lock:
            return {**self.counters, "latency_ms": self.latency.as_dict()}


class MetricsRegistry:
    """Every route's series, keyed by route, side and endpoint; safe across threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._series: dict[tuple[str, str, str], Series] = {}

    def series(self, route: str, side: str, endpoint: str) -> Series:
        """The series for this key, created on first use (shared by equal keys)."""
        with self._lock:
            key = (route, side, endpoint)
            if key not in self._series:
                self._series[key] = Series(side)
            return self._series[key]

    def series_items(self) -> list[tuple[tuple[str, str, str], Series]]:
        """``((route, side, endpoint), series)`` for every series."""
        with self._lock:
            return list(self._series.items())

    def snapshot(self) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
        """A copy of every figure: route -> side -> endpoint -> figures (the ``route``
        side: the route runner's counters, see the module's docstring)."""
        result: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
        for (route, side, endpoint), series in self.series_items():
            result.setdefault(route, {}).setdefault(side, {})[endpoint] = series.as_dict()
        for counters in all_route_counters():
            totals = counters.totals()
            figures = result.setdefault(counters.route, {}).setdefault("route", {})
            figures["runner"] = {k: totals[k] for k in (*STAGES, "errors", "in_flight")}
            if any(totals[name] for name in _OUTCOME_NAMES):
                figures["delivery"] = {name: totals[name] for name in _OUTCOME_NAMES}
        return result

    def reset(self) -> None:
        """Forget every figure (tests, or a process that reports and restarts its counts)."""
        with self._lock:
            self._series.clear()
        reset_route_counters()


METRICS = MetricsRegistry()


def metrics_snapshot() -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """Every metrics middleware's figures in this process: route -> side -> endpoint -> figures."""
    return METRICS.snapshot()


def record_delivery_outcome(route: str, dropped: int = 0, dead_lettered: int = 0) -> None:
    """Count messages of `route` that failed for good: dropped, or sent to a dead-letter
    endpoint (they show under ``metrics_snapshot()[route]["route"]["delivery"]``)."""
    route_counters(route).add(dropped=dropped, dead_lettered=dead_lettered)


def delivery_outcomes(route: str) -> dict[str, int]:
    """``{"dropped": n, "dead_lettered": m}`` for `route` so far in this process."""
    totals = route_counters(route).totals()
    return {name: int(totals[name]) for name in _OUTCOME_NAMES}


class MetricsOutput(OutputMiddleware):
    """Counts each send's messages and failures and times it; on a dead-letter endpoint,
    the route's dead letters too."""

    def __init__(self, inner: OutputEndpoint, series: Series, route: str = "") -> None:
        super().__init__(inner)
        self.series = series
        self.route = route

    def send(self, messages: Sequence[Message]) -> None:
        started = time.perf_counter()
        failed = 0
        try:
            self.inner.send(messages)
        except SendError as error:
            failed = len(error.failures)
            raise
        except Exception:
            failed = len(messages)
            raise
        finally:
            elapsed = time.perf_counter() - started
            self.series.add(elapsed, messages=len(messages), batches=1, failed=failed)
        if messages and _DLQ_ROUTE in messages[0].metadata_view:  # one look per batch
            self._count_dead_letters(messages)

    def _count_dead_letters(self, messages: Sequence[Message]) -> None:
        """A `dlq` middleware sends only dead letters, each marked with its route; a route
        that merely forwards another route's dead letters does not count them as its own."""
        ours = sum(1 for m in messages if m.metadata_view.get(_DLQ_ROUTE) == self.route)
        if ours:
            record_delivery_outcome(self.route, dead_lettered=ours)


class MetricsInput(InputMiddleware):
    """Counts what is handed out, acked and nacked, and times each batch until its ack."""

    def __init__(self, inner: InputEndpoint, series: Series) -> None:
        super().__init__(inner)
        self.series = series

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        try:
            batch = self.inner.receive(max_messages, timeout)
        except Exception:
            self.series.add(failed=1)
            raise
        if not batch:
            return batch
        self.series.add(messages=len(batch), batches=1)
        return Batch(batch.messages, (batch, time.perf_counter()))

    def ack(self, batch: Batch) -> None:
        inner, started = batch.token
        self.inner.ack(inner)
        self.series.add(time.perf_counter() - started, acked=len(batch))

    def nack(self, batch: Batch) -> None:
        inner, started = batch.token
        self.inner.nack(inner)
        self.series.add(time.perf_counter() - started, nacked=len(batch))


def wrap_output(
    inner: OutputEndpoint, options: MetricsOptions, context: BuildContext
) -> OutputEndpoint:
    """Wrap `inner` so its sends are counted and timed under the route's name."""
    series = METRICS.series(context.route_name, "output", inner.describe())
    return MetricsOutput(inner, series, context.route_name)


def wrap_input(
    inner: InputEndpoint, options: MetricsOptions, context: BuildContext
) -> InputEndpoint:
    """Wrap `inner` so its batches are counted and timed until acked."""
    return MetricsInput(inner, METRICS.series(context.route_name, "input", inner.describe()))
