"""Python handlers: what they may return, kind dispatch, and the stage that runs them.

A route's handler runs as a stage on the output side (`HandlerStage` wraps the output
endpoint, and the output's middleware wraps the stage), so `retry` and `dlq` see a failing
handler exactly like a failing broker: as a `SendError` with per-message causes.

Handler results:

    None              acknowledged, nothing forwarded
    Message           forwarded with its own metadata (and id, if it has one)
    bytes / str       raw payload / UTF-8 payload
    any other value   JSON payload

Except for a returned `Message`, the result keeps the input's id and metadata; a returned
`Message` without an id takes the input's (so a redelivered input gives the same output id).

Every result carries a ``correlation_id``, as in both peers: its own when it has one, else
the input's, else the input's id as 32 hex digits (so replies find their requester, and an
output can be traced to the message it came from). A result then needs a metadata dict
of its own (the value differs per message), made once with the key in it; a pass-through
needs a new message too (the input's is shared: a nack requeues it, a broadcast gives it
to every subscriber), made for the whole batch at once (`messages_with_id_metadata`).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from mq_bridge.endpoints.base import OutputEndpoint
from mq_bridge.errors import NonRetryableError, SendError
from mq_bridge.message import Message, dump_json, fields_of, messages_with_id_metadata
from mq_bridge.middleware.base import OutputMiddleware
from mq_bridge.observability.counters import HANDLER_SECONDS_BOUNDS

if TYPE_CHECKING:
    from mq_bridge.observability.counters import RouteCounters

perf_counter = time.perf_counter

__all__ = ["CORRELATION_ID", "Handler", "HandlerStage", "KindDispatcher", "to_output_message"]

Handler = Callable[[Message], Any]


#: The metadata key every handler result carries (see the module docstring).
CORRELATION_ID = "correlation_id"


def to_output_message(result: Any, source: Message) -> Message | None:
    """The message a handler's `result` stands for, given the `source` it handled."""
    kind = type(result)
    if kind is dict or kind is list:  # the usual JSON results first: one type check
        return _from_source(dump_json(result), source)
    if result is None:
        return None
    if result is source:
        return messages_with_id_metadata([source], CORRELATION_ID)[0]
    if kind is Message or isinstance(result, Message):
        return _returned_message(result, source)
    if kind is bytes:
        payload = result
    elif kind is str:
        payload = result.encode()
    elif kind is bytearray or kind is memoryview:
        payload = bytes(result)
    else:
        payload = dump_json(result)
    return _from_source(payload, source)


def _from_source(payload: bytes, source: Message) -> Message:
    """`payload` with `source`'s id and metadata, and a correlation_id: the source's own,
    else its id in 32 hex digits. The metadata is shared, not copied, when it has the key
    (messages never change theirs); else one copy with the key added."""
    metadata, _, id_value = fields_of(source)
    if id_value is None:
        id_value = source.id_int
    if CORRELATION_ID not in metadata:
        metadata = metadata.copy()
        metadata[CORRELATION_ID] = id_value.to_bytes(16, "big").hex()
    return Message.trusted(payload, metadata, id_value)


def _returned_message(result: Message, source: Message) -> Message:
    """A `Message` the handler returned: its own id (else the input's) and metadata, with
    its own ``correlation_id``, else the input's (see `_from_source`)."""
    metadata, payload, id_value = fields_of(result)
    if CORRELATION_ID in metadata:
        if id_value is not None:
            return result
    else:
        correlation_id = source.get(CORRELATION_ID)
        if correlation_id is None:
            correlation_id = source.id_int.to_bytes(16, "big").hex()
        metadata = metadata.copy()
        metadata[CORRELATION_ID] = correlation_id
    return Message.trusted(payload, metadata, source.id_int if id_value is None else id_value)


class KindDispatcher:
    """Calls the handler registered for a message's ``kind`` metadata with its JSON payload.

    Messages of a kind with no handler go to `fallback` (a raw handler) when there is one;
    otherwise they fail with `NonRetryableError` (dead-lettered, or logged and dropped).
    """

    def __init__(self, handlers: dict[str, Callable[[Any], Any]], fallback: Handler | None) -> None:
        self._handlers = handlers
        self._fallback = fallback

    def __call__(self, message: Message) -> Any:
        kind = message.metadata_view.get("kind")
        handler = self._handlers.get(kind) if kind is not None else None
        if handler is not None:
            return handler(message.json())
        if self._fallback is not None:
            return self._fallback(message)
        raise NonRetryableError(f"no handler for kind {kind!r} and no fallback handler")

    @property
    def has_coroutines(self) -> bool:
        handlers = [*self._handlers.values(), self._fallback]
        return any(inspect.iscoroutinefunction(h) for h in handlers if h is not None)


class HandlerStage(OutputMiddleware):
    """Runs the handler over a batch, then sends the results to the wrapped output.

    With `counters` set (the route's deliverer sets them), it counts the messages the
    handler handled, the time it took per batch, and the results the output took.
    """

    def __init__(self, inner: OutputEndpoint, handler: Handler, may_await: bool) -> None:
        super().__init__(inner)
        self._handler = handler
        self._may_await = may_await
        self._loops = threading.local()
        self._all_loops: list[asyncio.AbstractEventLoop] = []
        self.counters: RouteCounters | None = None

    def send(self, messages: Sequence[Message]) -> None:
        counters = self.counters
        started = perf_counter() if counters is not None else 0.0
        handler = self._handler
        convert = to_output_message
        results: list[Message] = []
        origins: list[int] = []
        failures: dict[int, BaseException] = {}
        pending: list[tuple[int, Any]] = []
        may_await = self._may_await
        passed_through = False
        for index, message in enumerate(messages):
            try:
                result = handler(message)
                if result is message:  # the common pass-through: correlated below, at once
                    results.append(message)
                    origins.append(index)
                    passed_through = True
                    continue
                if may_await and inspect.isawaitable(result):
                    pending.append((index, result))
                    continue
                output = convert(result, message)
            except Exception as error:
                failures[index] = error
                continue
            if output is not None:
                results.append(output)
                origins.append(index)
        if pending:
            self._await_all(messages, pending, results, origins, failures)
        if passed_through:
            results = messages_with_id_metadata(results, CORRELATION_ID)
        if counters is not None:
            self._count_and_forward(counters, len(messages), results, origins, failures, started)
        elif results:
            self._forward(results, origins, failures)
        if failures:
            raise SendError(failures)

    def _count_and_forward(
        self,
        counters: RouteCounters,
        count: int,
        results: list[Message],
        origins: list[int],
        failures: dict[int, BaseException],
        started: float,
    ) -> None:
        """Count what the handler handled and its time, then forward and count what the
        output took."""
        cell = counters.cell()
        elapsed = perf_counter() - started
        cell.handler_buckets[bisect_left(HANDLER_SECONDS_BOUNDS, elapsed)] += 1
        cell.handler_sum += elapsed
        cell.handled += count - len(failures)
        if results:
            before = len(failures)
            self._forward(results, origins, failures)
            cell.sent += len(results) - (len(failures) - before)

    def send_one(self, message: Message) -> None:
        self.send((message,))

    def _await_all(
        self,
        messages: Sequence[Message],
        pending: list[tuple[int, Any]],
        results: list[Message],
        origins: list[int],
        failures: dict[int, BaseException],
    ) -> None:
        outcomes = self._loop().run_until_complete(_gather(p for _, p in pending))
        for (index, _), outcome in zip(pending, outcomes):
            try:
                if isinstance(outcome, BaseException):
                    raise outcome
                output = to_output_message(outcome, messages[index])
            except Exception as error:
                failures[index] = error
                continue
            if output is not None:
                results.append(output)
                origins.append(index)
        if results:  # keep source order among the results sent together
            order = sorted(range(len(results)), key=origins.__getitem__)
            results[:] = [results[i] for i in order]
            origins[:] = [origins[i] for i in order]

    def _forward(
        self, results: list[Message], origins: list[int], failures: dict[int, BaseException]
    ) -> None:
        try:
            self.inner.send(results)
        except SendError as error:
            for position, cause in error.failures.items():
                failures[origins[position]] = cause
        except Exception as error:
            for index in origins:
                failures[index] = error

    def _loop(self) -> asyncio.AbstractEventLoop:
        """The event loop coroutine handlers run on: one per route thread, reused."""
        loop: asyncio.AbstractEventLoop | None = getattr(self._loops, "loop", None)
        if loop is None:
            loop = self._loops.loop = asyncio.new_event_loop()
            self._all_loops.append(loop)
        return loop

    def close(self) -> None:
        for loop in self._all_loops:
            loop.close()
        self._all_loops.clear()
        self._loops = threading.local()
        super().close()


async def _gather(awaitables: Any) -> list[Any]:
    return await asyncio.gather(*awaitables, return_exceptions=True)
