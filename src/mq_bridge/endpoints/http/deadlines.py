"""Request deadlines for one input: one timer for all its requests, not one per request.

Every request of an input has the same timeout, so their deadlines expire in arrival
order: they wait in a FIFO, and one timer, armed for the oldest, expires each request
still running at its deadline. A request costs an append instead of a timer handle in the
loop's heap (what `asyncio.timeout` costs), which shows at tens of thousands of requests a
second. Expiring ends whatever the request waits for: its body (the body stream is failed
with `BodyTimeout`) or its outcome (the outcome becomes 504). Everything here runs on the
loop thread.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["TIMED_OUT", "BodyTimeout", "Deadline", "Deadlines"]

#: The outcome of a request whose deadline passed.
TIMED_OUT = (504, None)


class BodyTimeout(asyncio.TimeoutError):
    """The request's body did not arrive before its deadline.

    A timeout, so that aiohttp, which drains an unread body after the answer (our 504), takes
    it as the end of that drain and closes the connection, instead of logging an "Unhandled
    exception" with a traceback for every slow client."""


class Deadline:
    """One request's deadline and what it waits for: its body, then its outcome."""

    __slots__ = ("at", "finished", "outcome", "request")

    def __init__(self, at: float, request: web.BaseRequest) -> None:
        self.at = at
        self.request: web.BaseRequest | None = request
        self.outcome: asyncio.Future[Any] | None = None
        self.finished = False

    def expire(self) -> None:
        if self.outcome is not None:
            if not self.outcome.done():
                self.outcome.set_result(TIMED_OUT)
        elif self.request is not None:
            self.request.content.set_exception(BodyTimeout())


class Deadlines:
    """The deadlines of one input's requests, `timeout` seconds after each started."""

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float) -> None:
        self._loop = loop
        self._timeout = timeout
        self._queue: deque[Deadline] = deque()
        self._timer: asyncio.TimerHandle | None = None

    def track(self, request: web.BaseRequest) -> Deadline:
        """A deadline for `request` (mark it `finished` when the request is answered)."""
        queue = self._queue
        while queue and queue[0].finished:  # most finish in order: the FIFO stays short
            queue.popleft()
        deadline = Deadline(self._loop.time() + self._timeout, request)
        queue.append(deadline)
        if self._timer is None:
            self._timer = self._loop.call_at(deadline.at, self._sweep)
        return deadline

    def _sweep(self) -> None:
        self._timer = None
        queue = self._queue
        now = self._loop.time()
        while queue and (queue[0].finished or queue[0].at <= now):
            deadline = queue.popleft()
            if not deadline.finished:
                deadline.expire()
        if queue:
            self._timer = self._loop.call_at(queue[0].at, self._sweep)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._queue.clear()
