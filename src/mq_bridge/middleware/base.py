"""Middleware: wrappers that add one behaviour to an endpoint and are endpoints themselves.

A middleware module in `mq_bridge.middleware` is registered by its config name in
`mq_bridge.middleware.registry` and exposes:

    OPTIONS: type[Options]   its option declaration (``{"retry": {...}}``'s value), a pydantic
                             model: the JSON Schema, defaults and checks all come from it
                             (`mq_bridge.config.declarations`)
    wrap_input(inner, options: OPTIONS, context: BuildContext) -> InputEndpoint   (inputs)
    wrap_output(inner, options: OPTIONS, context: BuildContext) -> OutputEndpoint  (outputs)

`wrap_*` receive the options already parsed (defaults filled, validated); they check only
what depends on the runtime (``retry`` refusing an inner ``dlq``, ``random_panic`` needing
``allow_fault_injection``).

An endpoint config lists middleware under ``middlewares:``. The list applies in order,
outermost first: ``[metrics, dlq, retry]`` on an output means a send goes through
metrics, then dlq, then retry, then the endpoint, so dlq receives what retry gave up on
(see docs/design.md, "Middleware").

A route's handler runs as part of its output side: handler errors reach output middleware
as `SendError`s with per-message causes, so `retry` and `dlq` treat a failing handler and
a failing broker the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from mq_bridge.endpoints.base import Batch, EndpointStatus, InputEndpoint, OutputEndpoint
from mq_bridge.message import Message

__all__ = ["InputMiddleware", "OutputMiddleware"]


class InputMiddleware(InputEndpoint):
    """Delegates everything to `inner`; subclasses override what they change."""

    def __init__(self, inner: InputEndpoint) -> None:
        self.inner = inner

    @property
    def acks_in_any_order(self) -> bool:  # type: ignore[override]
        return self.inner.acks_in_any_order

    @property
    def redelivers(self) -> bool:  # type: ignore[override]
        return self.inner.redelivers

    def connect(self) -> None:
        self.inner.connect()

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        return self.inner.receive(max_messages, timeout)

    def ack(self, batch: Batch) -> None:
        self.inner.ack(batch)

    def nack(self, batch: Batch) -> None:
        self.inner.nack(batch)

    @property
    def exhausted(self) -> bool:
        return self.inner.exhausted

    def status(self) -> EndpointStatus:
        return self.inner.status()

    def describe(self) -> str:
        return self.inner.describe()

    def interrupt(self) -> None:
        self.inner.interrupt()

    def close(self) -> None:
        self.inner.close()


class OutputMiddleware(OutputEndpoint):
    """Delegates everything to `inner`; subclasses override what they change."""

    def __init__(self, inner: OutputEndpoint) -> None:
        self.inner = inner

    def connect(self) -> None:
        self.inner.connect()

    def send(self, messages: Sequence[Message]) -> None:
        self.inner.send(messages)

    def request(self, message: Message, timeout: float | None) -> Message:
        return self.inner.request(message, timeout)

    def flush(self) -> None:
        self.inner.flush()

    def status(self) -> EndpointStatus:
        return self.inner.status()

    def describe(self) -> str:
        return self.inner.describe()

    def close(self) -> None:
        self.inner.close()
