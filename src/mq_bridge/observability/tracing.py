"""OpenTelemetry tracing of routes: W3C trace context carried in message metadata.

Off unless enabled (``enable_tracing()``, or ``mq-bridge run --tracing``). When off, the
route runner calls its deliverer directly, as if this module did not exist: tracing off
costs nothing. When on, each message a route delivers gets a span::

    incoming metadata               span (kind CONSUMER)                 outgoing metadata
    traceparent: 00-T-P-01   ->     "<route> process", trace T,    ->    traceparent: 00-T-S-01
    (none: a new trace)             parent P, span id S                  (+ tracestate)

so the next route (on any broker that keeps metadata) continues trace T, and a trace
follows a message from one service to the next. The span carries the route's name and
its input and output endpoints (``mq_bridge.route``, ``messaging.source.name``,
``messaging.destination.name``, ``messaging.message.id``) and ends when the batch is
delivered; a failure is recorded on it.

Spans come from the global tracer provider (``opentelemetry.trace``) unless
``enable_tracing(tracer_provider=...)`` names one; configure the SDK and its exporter
as usual (``opentelemetry-instrument``, or in your own code). Needs the ``otel`` extra
(``pip install 'twainmq[otel]'``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mq_bridge.message import Message

__all__ = [
    "TRACEPARENT",
    "TRACESTATE",
    "disable_tracing",
    "enable_tracing",
    "enabled",
    "traced_delivery",
]

#: The W3C Trace Context metadata keys.
TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"

Deliver = Callable[[Sequence[Message]], bool]

_tracer: Any = None


def enable_tracing(tracer_provider: Any = None) -> None:
    """Trace every route started from now on (routes already running are not traced)."""
    global _tracer
    try:
        from opentelemetry import trace
    except ImportError as error:
        from mq_bridge.errors import ConfigError

        raise ConfigError(
            "tracing needs OpenTelemetry: pip install 'twainmq[otel]'", path="tracing"
        ) from error
    provider = tracer_provider or trace.get_tracer_provider()
    _tracer = provider.get_tracer("mq_bridge")


def disable_tracing() -> None:
    """Routes started from now on are not traced."""
    global _tracer
    _tracer = None


def enabled() -> bool:
    """Whether routes started now get traced."""
    return _tracer is not None


def traced_delivery(deliver: Deliver, route: str, source: str, destination: str) -> Deliver:
    """`deliver` with a span per message, each message's ``traceparent`` replaced by its span's."""
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    tracer = _tracer
    propagator = TraceContextTextMapPropagator()
    name = f"{route} process"
    attributes = {
        "mq_bridge.route": route,
        "messaging.source.name": source,
        "messaging.destination.name": destination,
        "messaging.operation.type": "process",
    }

    def deliver_traced(messages: Sequence[Message]) -> bool:
        spans = []
        carried = []
        for message in messages:
            parent = propagator.extract(message.metadata_view)
            span = tracer.start_span(
                name,
                context=parent,
                kind=SpanKind.CONSUMER,
                attributes={**attributes, "messaging.message.id": message.assigned_id()},
            )
            carrier: dict[str, str] = {}
            propagator.inject(carrier, context=trace.set_span_in_context(span))
            spans.append(span)
            carried.append(message.with_metadata(carrier))
        try:
            delivered = deliver(carried)
        except BaseException as error:
            for span in spans:
                span.record_exception(error)
                span.set_status(Status(StatusCode.ERROR, str(error)))
            raise
        finally:
            for span in spans:
                span.end()
        return delivered

    return deliver_traced
