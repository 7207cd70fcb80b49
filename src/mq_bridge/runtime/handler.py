"""Python handlers: what they may return, kind dispatch, and the stage that runs them.

A route's handler runs as a stage on the output side (`HandlerStage` wraps the output
endpoint, and the output's middleware wraps the stage), so `retry` and `dlq` see a failing
handler exactly like a failing broker: as a `SendError` with per-message causes.

Handler results:

    None              acknowledged, nothing forwarded
    Message           forwarded as is
    bytes / str       raw payload / UTF-8 payload
    any other value   JSON payload

Except for a returned `Message`, the result keeps the input's id and metadata. Every result
keeps the input's ``correlation_id`` (so replies find their requester).
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
from mq_bridge.message import Message, dump_json
from mq_bridge.middleware.base import OutputMiddleware
from mq_bridge.observability.counters import HANDLER_SECONDS_BOUNDS

if TYPE_CHECKING:
    from mq_bridge.observability.counters import RouteCounters

perf_counter = time.perf_counter

__all__ = ["Handler", "HandlerStage", "KindDispatcher", "to_output_message"]

Handler = Callable[[Message], Any]


def to_output_message(result: Any, source: Message) -> Message | None:
    """The message a handler's `result` stands for, given the `source` it handled."""
    kind = type(result)
    # Messages are immutable, so a result may share the source's metadata dict.
    if kind is dict or kind is list:  # the usual JSON results first: one type check
        return Message.trusted(dump_json(result), source.metadata_view, source.id_int)
    if result is None:
        return None
    if kind is Message or isinstance(result, Message):
        result.id_int  # noqa: B018 - a new message gets its id as it travels
        return _keep_correlation(result, source)
    if kind is bytes:
        payload = result
    elif kind is str:
        payload = result.encode()
    elif kind is bytearray or kind is memoryview:
        payload = bytes(result)
    else:
        payload = dump_json(result)
    return Message.trusted(payload, source.metadata_view, source.id_int)


def _keep_correlation(result: Message, source: Message) -> Message:
    correlation_id = source.metadata_view.get("correlation_id")
    if correlation_id is None or result.metadata_view.get("correlation_id") == correlation_id:
        return result
    return result.with_metadata(correlation_id=correlation_id)


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
        for index, message in enumerate(messages):
            try:
                result = handler(message)
                if result is message:  # the common pass-through: nothing to convert
                    results.append(message)
                    origins.append(index)
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
