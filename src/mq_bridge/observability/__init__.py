"""Observability of routes and stores: counters, Prometheus metrics, OpenTelemetry traces.

    counters     the route runner's counters: the one source of every figure below
    prometheus   ``/metrics``: collectors over the counters, the metrics middleware's
                 series, and twainmq stores (topics, partitions, groups); the server
                 behind ``mq-bridge run --metrics-port``
    store_stats  what the store collector and the console read from a twainmq root
    tracing      W3C ``traceparent`` carried in message metadata, a span per message
                 (off unless enabled)

Nothing here is imported by ``import mq_bridge``; prometheus-client and OpenTelemetry
are imported only when used (extras ``metrics`` and ``otel``).
"""

from __future__ import annotations

from mq_bridge.observability.tracing import disable_tracing, enable_tracing

__all__ = ["disable_tracing", "enable_tracing"]
