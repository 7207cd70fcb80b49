"""The hand-off between a listener's loop and the route thread of one input.

    route thread:  receive() --drives the listener's loop--> handlers queue requests
                   <-- batch ---------------------------------'
                   handler, `response`, ack  --settle()--> outcomes, applied on the loop
                                                           when it next runs

`receive` runs the listener's loop itself (`Listener.drive`) until a request is queued
for this input, so requests and replies cross no thread on the way (see
`mq_bridge.endpoints.kit.listener`). When another route drives the shared loop, `receive`
waits for its requests to be queued (a condition), trying to drive again every 50 ms.
`settle` may be called from any thread (the route's, a handler thread in the pipelined
executor): outcomes are queued, and the loop is woken once per group of them.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.errors import ClosedError

if TYPE_CHECKING:
    from mq_bridge.endpoints.kit.listener import Listener

__all__ = ["Handoff", "Settleable"]

#: How long a route waits for another route's drive before it tries to drive itself.
WAIT_SLICE = 0.05


class Settleable(Protocol):
    def resolve(self, outcome: Any) -> None:
        """On the loop: apply `outcome` (answer the request)."""


ItemT = TypeVar("ItemT")


class Handoff(Generic[ItemT]):
    """Requests queued for one input's route, and their outcomes back to the loop."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.queue: deque[ItemT] = deque()
        self.listener: Listener | None = None
        self._ready = threading.Condition(threading.Lock())
        self._wakeup = Wakeup(self._ready)
        self._waiting = False
        self._settled: deque[tuple[Settleable, Any]] = deque()
        self._flush_scheduled = False

    # -- the loop ----------------------------------------------------------------------

    def put(self, item: ItemT) -> None:
        """Queue a request (on the loop): the route's `receive` returns after this loop
        iteration, so every request parsed in it goes in one batch."""
        self.queue.append(item)
        listener = self.listener
        if listener is not None and listener.driver is self:
            listener.stop()
        elif self._waiting:
            with self._ready:
                self._ready.notify()

    def _flush(self) -> None:
        self._flush_scheduled = False  # first: a settle racing with the drain schedules anew
        settled = self._settled
        while settled:
            pending, outcome = settled.popleft()
            pending.resolve(outcome)

    # -- the route thread (or any thread) ------------------------------------------------

    def take(self, max_messages: int, timeout: float | None) -> list[ItemT]:
        """Up to `max_messages` queued requests, driving the loop up to `timeout` seconds
        for the first; raises `ClosedError` once the input is closed."""
        queue, wakeup = self.queue, self._wakeup
        deadline = None if timeout is None else time.monotonic() + timeout
        while not queue:
            listener = self.listener
            if listener is None:
                raise ClosedError(f"the {self.name} input is closed")
            if wakeup.pending:
                break
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            if listener.drive(self, remaining, lambda: wakeup.pending):
                continue
            with self._ready:
                self._waiting = True
                try:
                    if not queue and not wakeup.pending:
                        self._ready.wait(
                            WAIT_SLICE if remaining is None else min(remaining, WAIT_SLICE)
                        )
                finally:
                    self._waiting = False
        wakeup.consume()  # what is queued (maybe nothing) answers an interrupt
        items: list[ItemT] = []
        while queue and len(items) < max_messages:
            items.append(queue.popleft())
        return items

    def settle(self, pending: Settleable, outcome: Any) -> None:
        """Apply `outcome` to `pending` on the loop (from any thread)."""
        self._settled.append((pending, outcome))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            listener = self.listener
            if listener is not None:
                listener.call_soon_threadsafe(self._flush)

    def interrupt(self) -> None:
        """End a `take` blocked in another thread, or else the next one."""
        self._wakeup.interrupt()
        listener = self.listener
        if listener is not None and listener.driver is self:
            listener.stop_threadsafe()

    def flush_now(self) -> None:
        """Apply queued outcomes at once (the caller holds the loop: closing)."""
        self._flush()
