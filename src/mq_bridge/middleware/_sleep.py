"""A sleep that `close()` or `interrupt()` can cut short (retry backoff, delay, limiter).

A route stops by interrupting its input and closing its endpoints; a middleware sleeping
in a backoff must not hold that shutdown up for seconds.
"""

from __future__ import annotations

import threading


class WakeableSleep:
    """`sleep(seconds)` returns early, with False, once `wake()` has been called."""

    def __init__(self) -> None:
        self._woken = threading.Event()

    def sleep(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True when the full time passed, False when woken."""
        if seconds <= 0:
            return not self._woken.is_set()
        return not self._woken.wait(seconds)

    def wake(self) -> None:
        """End every current and future sleep at once (the owner is shutting down)."""
        self._woken.set()

    def reset(self) -> None:
        """Allow full sleeps again (an interrupted input is being used once more)."""
        self._woken.clear()

    @property
    def woken(self) -> bool:
        return self._woken.is_set()
