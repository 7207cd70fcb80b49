"""A sleep that `close()`, `interrupt()` or the route's stop can cut short.

Retry backoff, delay and limiter waits must not hold a stopping route up for seconds. An
output is told through `close()`; an output wait also ends when the build context carries
the route's stop event (``context.stopping``, a `threading.Event`, when the runtime provides
one). (Input middleware waits with `kit.wakeup.Wakeup`, the rule of `interrupt()`.)
"""

from __future__ import annotations

import threading
import time

from mq_bridge.endpoints.base import BuildContext

_STOP_CHECK = 0.05  # seconds between looks at the route's stop event during a long wait


class WakeableSleep:
    """`sleep(seconds)` returns early, with False, once woken or once the route stops."""

    def __init__(self, stopping: threading.Event | None = None) -> None:
        self._woken = threading.Event()
        self._stopping = stopping

    @classmethod
    def for_route(cls, context: BuildContext) -> WakeableSleep:
        """A sleep that also ends when the route of `context` stops."""
        stopping = getattr(context, "stopping", None)
        return cls(stopping if isinstance(stopping, threading.Event) else None)

    def sleep(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True when the full time passed, False when cut short."""
        if self._stopping is None:
            return not self._woken.wait(seconds) if seconds > 0 else not self._woken.is_set()
        ends = time.monotonic() + seconds
        while not self._stopping.is_set():
            remaining = ends - time.monotonic()
            if remaining <= 0:
                return not self._woken.is_set()
            if self._woken.wait(min(remaining, _STOP_CHECK)):
                return False
        return False

    def wake(self) -> None:
        """End every current and future sleep at once (the owner is shutting down)."""
        self._woken.set()

    def reset(self) -> None:
        """Allow full sleeps again (an interrupted input is being used once more)."""
        self._woken.clear()

    @property
    def woken(self) -> bool:
        return self._woken.is_set()
