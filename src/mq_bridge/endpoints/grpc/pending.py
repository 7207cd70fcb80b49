"""A published message waiting for the route to settle it, and what serves its topic.

The server's handlers run on its asyncio loop (`loop`); the consumer settles from its own
thread. `settle_all` answers a whole batch with one wake-up of the loop, not one per
message: a ``PublishBatch`` of 500 costs a handful of thread hand-overs, not 500.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol

from mq_bridge.endpoints.grpc.codec import nack_response

__all__ = ["Pending", "TopicSink", "settle_all"]


class Pending:
    """A published message (`bridge`) and the answer its publisher is waiting for."""

    __slots__ = ("_future", "bridge")

    def __init__(self, bridge: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.bridge = bridge
        self._future: asyncio.Future[Any] = loop.create_future()

    async def answer(self, timeout: float | None) -> Any:
        """(On the loop.) The answer, or a NACK once `timeout` s passed without one."""
        future = self._future
        if not future.done():
            try:
                await asyncio.wait_for(future, timeout)
            except asyncio.TimeoutError:
                return nack_response(self.bridge.id, "Timed out waiting for the route to commit")
        return future.result()


def settle_all(answers: Sequence[tuple[Pending, Any]]) -> None:
    """(Any thread.) Give each pending message its answer, waking the loop once; the
    first answer a message gets wins."""
    if not answers:
        return
    try:
        answers[0][0]._future.get_loop().call_soon_threadsafe(_resolve, answers)
    except RuntimeError:  # the loop is closed: the process is exiting
        pass


def _resolve(answers: Sequence[tuple[Pending, Any]]) -> None:
    for pending, response in answers:
        future = pending._future
        if not future.done():  # settled before, or the publisher gave up waiting
            future.set_result(response)


class TopicSink(Protocol):
    """What a server-mode input offers the server: a queue for its topic's messages."""

    def full(self) -> bool:
        """Whether the queue is at its limit (the server waits before it offers more)."""
        ...

    def offer(self, pending: Pending) -> bool:
        """Queue `pending` (without waiting); False when the input is closed."""
        ...
