"""custom: middleware written in Python, registered with `mq_bridge.register_middleware`.

``{"custom": {"name": "stamp", "config": {...}}}`` in any endpoint's ``middlewares`` list
wraps the endpoint with the object ``factory(route_name, config)`` returns (made once per
endpoint it is attached to). The object implements any of:

- ``on_receive(messages)`` (applies on an input): called with each received batch;
- ``on_send(messages)`` (applies on an output): called with each batch before it is sent.

Both return one item per message: a `Message` (kept, possibly rewritten) or None (dropped).
A dropped received message is acknowledged with its batch (it was handled: filtered out);
a dropped sent message counts as sent. A side the object does not implement passes
through untouched. A hook that returns a different number of items raises `EndpointError`.
Exceptions from a hook propagate unchanged (`RetryableError` is retried).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import Field

from mq_bridge.config.declarations import Options
from mq_bridge.endpoints.base import Batch, BuildContext, InputEndpoint, OutputEndpoint
from mq_bridge.errors import EndpointError, SendError
from mq_bridge.message import Message
from mq_bridge.middleware._ordered_acks import OrderedAcks
from mq_bridge.middleware.base import InputMiddleware, OutputMiddleware

__all__ = ["OPTIONS", "CustomMiddlewareOptions", "wrap_input", "wrap_output"]


class CustomMiddlewareOptions(Options):
    """A middleware registered from Python with mq_bridge.register_middleware, by name."""

    model_config = {**Options.model_config, "title": "CustomMiddleware"}

    name: str = Field(min_length=1, description="The registered middleware's name.")
    config: Any = Field(None, description="Handed to the middleware's factory (default {}).")

    #: `config` goes to the user's own factory, which decides what it takes.
    NUL_ALLOWED: ClassVar[frozenset[str]] = frozenset({"config"})


OPTIONS = CustomMiddlewareOptions


def _kept(
    name: str, hook: str, messages: Sequence[Message], results: Any
) -> tuple[list[int], list[Any]]:
    """The indexes of the messages kept and the hook's checked result, one item each."""
    if results is None or isinstance(results, (str, bytes, Message)):
        raise EndpointError(f"custom middleware {name}: {hook} must return a list")
    results = list(results)
    if len(results) != len(messages):
        raise EndpointError(
            f"custom middleware {name}: {hook} returned {len(results)} items for "
            f"{len(messages)} messages (return one Message or None per message)"
        )
    for index, result in enumerate(results):
        if result is not None and not isinstance(result, Message):
            raise EndpointError(
                f"custom middleware {name}: {hook} item {index} is a "
                f"{type(result).__name__}, not a Message or None"
            )
    return [i for i, result in enumerate(results) if result is not None], results


class CustomInput(InputMiddleware):
    """Hands each received batch to ``on_receive``; acks batches it emptied at once."""

    def __init__(self, inner: InputEndpoint, name: str, hooks: Any) -> None:
        super().__init__(inner)
        self.name = name
        self.hooks = hooks
        self.acks = OrderedAcks(inner)

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        ends = None if timeout is None else time.monotonic() + timeout
        while True:
            batch = self.inner.receive(max_messages, timeout)
            if not batch:
                return batch
            entry = self.acks.handed_out(batch)
            try:
                results = self.hooks.on_receive(list(batch.messages))
                kept, results = _kept(self.name, "on_receive", batch.messages, results)
            except BaseException:
                self.acks.failed(entry)
                raise
            if kept:
                return Batch([results[i] for i in kept], entry)
            self.acks.done(entry)  # every message filtered out: handled
            if ends is not None:
                timeout = max(0.0, ends - time.monotonic())
                if timeout == 0.0:
                    return Batch([])

    def ack(self, batch: Batch) -> None:
        self.acks.done(batch.token)

    def nack(self, batch: Batch) -> None:
        self.acks.failed(batch.token)


class CustomOutput(OutputMiddleware):
    """Hands each batch to ``on_send`` and sends what it kept."""

    def __init__(self, inner: OutputEndpoint, name: str, hooks: Any) -> None:
        super().__init__(inner)
        self.name = name
        self.hooks = hooks

    def send(self, messages: Sequence[Message]) -> None:
        results = self.hooks.on_send(list(messages))
        kept, results = _kept(self.name, "on_send", messages, results)
        if not kept:
            return
        try:
            self.inner.send([results[i] for i in kept])
        except SendError as error:
            raise SendError({kept[p]: cause for p, cause in error.failures.items()}) from error

    def request(self, message: Message, timeout: float | None) -> Message:
        results = self.hooks.on_send([message])
        kept, results = _kept(self.name, "on_send", [message], results)
        if not kept:
            raise EndpointError(f"custom middleware {self.name}: on_send dropped the request")
        return self.inner.request(results[0], timeout)


def _hooks(options: CustomMiddlewareOptions, context: BuildContext) -> Any:
    from mq_bridge.endpoints.python.registry import middleware_factory

    factory = middleware_factory(options.name, "custom.name")
    return factory(context.route_name, {} if options.config is None else options.config)


def wrap_input(
    inner: InputEndpoint, options: CustomMiddlewareOptions, context: BuildContext
) -> InputEndpoint:
    """`inner` with the middleware's ``on_receive`` (unchanged when it has none)."""
    hooks = _hooks(options, context)
    if not callable(getattr(hooks, "on_receive", None)):
        return inner
    return CustomInput(inner, options.name, hooks)


def wrap_output(
    inner: OutputEndpoint, options: CustomMiddlewareOptions, context: BuildContext
) -> OutputEndpoint:
    """`inner` with the middleware's ``on_send`` (unchanged when it has none)."""
    hooks = _hooks(options, context)
    if not callable(getattr(hooks, "on_send", None)):
        return inner
    return CustomOutput(inner, options.name, hooks)
