"""The asyncio twin of the API: `AsyncRoute`, `AsyncPublisher`, `AsyncConsumer`.

Parallel types, not a flag: each wraps its synchronous counterpart and runs the calls that
may block (connecting, sending, polling, joining) off the event loop with
`asyncio.to_thread`, so the application's loop never stalls. Handlers may be plain or
coroutine functions; coroutine handlers run on the route's own event loop, not the
caller's, so they must not share loop-bound objects with it.

    async with AsyncPublisher.from_config({"memory": {"topic": "orders"}}) as publisher:
        await publisher.send_json({"order_id": 42})
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any

from mq_bridge.consumer import DEFAULT_MAX, Consumer
from mq_bridge.message import Message
from mq_bridge.publisher import Publisher
from mq_bridge.route import Route

__all__ = ["AsyncConsumer", "AsyncPublisher", "AsyncRoute"]


class AsyncRoute:
    """A `Route` driven from asyncio: `await start()`, `await stop()`, ``async with``."""

    def __init__(self, route: Route) -> None:
        self.sync = route

    @classmethod
    def from_file(cls, path: str, name: str | None = None) -> AsyncRoute:
        return cls(Route.from_file(path, name))

    @classmethod
    def from_str(cls, text: str, name: str | None = None) -> AsyncRoute:
        return cls(Route.from_str(text, name))

    @classmethod
    def from_config(cls, config: Mapping[str, Any], name: str | None = None) -> AsyncRoute:
        return cls(Route.from_config(config, name))

    def with_handler(self, handler: Callable[[Message], Any]) -> AsyncRoute:
        self.sync.with_handler(handler)
        return self

    def add_handler(self, kind: str, handler: Callable[[Any], Any]) -> AsyncRoute:
        self.sync.add_handler(kind, handler)
        return self

    async def start(self) -> None:
        """Build and connect the endpoints (errors raise here), then run in the background."""
        await asyncio.to_thread(self.sync.start)

    async def stop(self) -> None:
        """Ask the route to stop and wait until it has."""
        self.sync.stop()
        await self.join()

    @property
    def name(self) -> str:
        """The route's name (``name`` in its config, else ``route``)."""
        return self.sync.name

    @property
    def running(self) -> bool:
        """True from `start` until the route has stopped."""
        return self.sync.running

    async def join(self, timeout: float | None = None) -> None:
        """Wait (off the loop) until the route stops, or at most `timeout` seconds (then
        check `running`); re-raise the error that ended it, if any — as `Route.join`."""
        await asyncio.to_thread(self.sync.join, timeout)

    async def run(self) -> None:
        """Start and wait until the route stops; cancelling the task stops the route."""
        await self.start()
        try:
            await self.join()
        except asyncio.CancelledError:
            await self.stop()
            raise

    async def __aenter__(self) -> AsyncRoute:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()


class AsyncPublisher:
    """A `Publisher` whose sends never block the event loop.

    A send that the endpoint can take at once (a memory topic with room) happens right on
    the loop; anything that may wait (I/O, a full topic, requests) runs in a thread.
    """

    def __init__(self, publisher: Publisher) -> None:
        self.sync = publisher

    @classmethod
    def from_file(cls, path: str, name: str | None = None) -> AsyncPublisher:
        return cls(Publisher.from_file(path, name))

    @classmethod
    def from_str(cls, text: str, name: str | None = None) -> AsyncPublisher:
        return cls(Publisher.from_str(text, name))

    @classmethod
    def from_config(cls, config: Mapping[str, Any], name: str | None = None) -> AsyncPublisher:
        return cls(Publisher.from_config(config, name))

    async def send(
        self, message: Message | bytes, metadata: Mapping[str, str] | None = None
    ) -> None:
        """Send on the loop when the endpoint can take it at once, else from a thread."""
        if not self.sync.try_send(message, metadata):
            await asyncio.to_thread(self.sync.send, message, metadata)

    async def send_json(
        self, data: Any, metadata: Mapping[str, str] | None = None, id: str | None = None
    ) -> None:
        await self.send(Message.from_json(data, metadata, id))

    async def send_batch(self, messages: Iterable[Message | bytes]) -> None:
        await asyncio.to_thread(self.sync.send_batch, list(messages))

    async def request(
        self, message: Message | bytes, metadata: Mapping[str, str] | None = None
    ) -> Message:
        return await asyncio.to_thread(self.sync.request, message, metadata)

    async def request_json(
        self, data: Any, metadata: Mapping[str, str] | None = None, id: str | None = None
    ) -> Message:
        return await asyncio.to_thread(self.sync.request_json, data, metadata, id)

    async def aclose(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncPublisher:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class AsyncConsumer:
    """A `Consumer` whose polls run off the event loop."""

    def __init__(self, consumer: Consumer) -> None:
        self.sync = consumer

    @classmethod
    def from_file(cls, path: str, name: str | None = None) -> AsyncConsumer:
        return cls(Consumer.from_file(path, name))

    @classmethod
    def from_str(cls, text: str, name: str | None = None) -> AsyncConsumer:
        return cls(Consumer.from_str(text, name))

    @classmethod
    def from_config(cls, config: Mapping[str, Any], name: str | None = None) -> AsyncConsumer:
        return cls(Consumer.from_config(config, name))

    async def poll(self, max: int = DEFAULT_MAX, timeout_ms: int | None = None) -> list[Message]:
        return await asyncio.to_thread(self.sync.poll, max, timeout_ms)

    async def poll_batch(
        self, max: int = DEFAULT_MAX, timeout_ms: int | None = None
    ) -> tuple[list[Message], int | None]:
        return await asyncio.to_thread(self.sync.poll_batch, max, timeout_ms)

    async def ack(self, token: int) -> None:
        await asyncio.to_thread(self.sync.ack, token)

    async def nack(self, token: int | None = None) -> None:
        await asyncio.to_thread(self.sync.nack, token)

    async def commit(self) -> None:
        await asyncio.to_thread(self.sync.commit)

    async def status(self) -> dict[str, Any]:
        """`Consumer.status`, asked from a thread: an endpoint may ask its broker (a
        queue's depth, a group's lag), which must not stall the loop."""
        return await asyncio.to_thread(self.sync.status)

    @property
    def exhausted(self) -> bool:
        return self.sync.exhausted

    async def aclose(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncConsumer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
