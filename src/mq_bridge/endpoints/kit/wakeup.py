"""`Wakeup`: the one interrupt of an input's `receive`, never lost.

The rule every input keeps (``InputEndpoint.interrupt``): an interrupt is remembered until
a receive consumes it. The receive blocked at that moment, or else the next one, returns
at once (empty, or with what it already has); the receive after that waits normally::

    interrupt() ──► pending ──► receive: returns at once, consumes it ──► receive: waits

A counter compared at the start of `receive` loses an interrupt that lands just before
it (that receive waits out its whole timeout); a flag that only a *waiting* receive clears
makes some later, unrelated receive return empty. `Wakeup` is the flag, consumed by the
first receive to return, whether or not it had to wait.

Two ways to wait with it:

- on a condition (an inbox a network thread fills): build it with that condition and,
  holding it, call `wait_until(ready, deadline)`; producers notify the condition as usual,
  `interrupt()` notifies it too;
- between polls of a driver that cannot be woken (`poll(0)` in a loop): `pause(seconds)`
  ends early once an interrupt is pending and leaves it pending; the receive polls once
  more (what is there is handed out) and then `consume()`s it.

`pending` and `consume` take no lock: a receive that found messages pays one attribute
read. That is safe because a waiter checks the flag with the condition held, and
`interrupt` sets it with the condition held, so it cannot slip between check and wait.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["Wakeup"]


class Wakeup:
    """An interrupt remembered until a receive consumes it (see the module docstring)."""

    __slots__ = ("_nudged", "_pending", "condition")

    def __init__(self, condition: threading.Condition | None = None) -> None:
        #: The condition a waiting receive sleeps on; `interrupt` notifies it.
        self.condition = condition if condition is not None else threading.Condition()
        self._pending = False
        self._nudged = False

    @property
    def pending(self) -> bool:
        """An interrupt came that no receive has consumed yet."""
        return self._pending

    def interrupt(self) -> None:
        """End the receive waiting now, or else the next one (from any thread)."""
        with self.condition:
            self._pending = True
            self.condition.notify_all()

    def consume(self) -> bool:
        """Forget a pending interrupt; True if there was one. Call it as a receive returns."""
        if not self._pending:
            return False
        self._pending = False
        return True

    def wait_until(self, ready: Callable[[], object], deadline: float | None) -> bool:
        """(With `condition` held.) Wait until `ready()` is true, an interrupt is pending
        or `deadline` (`time.monotonic()`; None: no limit) passes. A pending interrupt is
        consumed either way; True when there was one."""
        condition = self.condition
        while not self._pending and not ready():
            if deadline is None:
                condition.wait()
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            condition.wait(remaining)
        return self.consume()

    def pause(self, seconds: float | None) -> bool:
        """Sleep up to `seconds` between polls. An interrupt ends it at once and stays
        pending (the receive polls once more, then consumes it); so does a `nudge`, which
        is consumed here. True when cut short by either. (None: no limit.)"""
        with self.condition:
            if not self._pending and not self._nudged and (seconds is None or seconds > 0):
                self.condition.wait(seconds)
            woken = self._pending or self._nudged
            self._nudged = False
            return woken

    def nudge(self) -> None:
        """End a `pause` without interrupting the receive: there may be something to poll
        now (a database notification). From any thread."""
        with self.condition:
            self._nudged = True
            self.condition.notify_all()
