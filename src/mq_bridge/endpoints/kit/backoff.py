"""The one backoff of the project: exponential, capped, with jitter.

The `retry` middleware waits with it between attempts, and the runtime waits with it while
an output is unreachable, an input reconnects or a handler keeps failing. One formula, so a
broker restart is met the same way everywhere::

    delay(n) = min(maximum, initial * multiplier ** (n - 1)) * (1 - jitter * random())

    initial 0.1 s, maximum 5 s, multiplier 2, jitter 0.2:
    n:      1     2     3     4     5     6     7 ...
    delay:  0.1   0.2   0.4   0.8   1.6   3.2   5.0 ... (each up to 20 % shorter)

Jitter spreads out the retries of many routes that failed at the same moment (a broker
restart), so they do not all hit the server again in lock-step.
"""

from __future__ import annotations

import random

__all__ = ["Backoff"]


class Backoff:
    """The wait before each retry: exponential, capped, with optional jitter."""

    def __init__(
        self,
        initial: float,
        maximum: float,
        multiplier: float = 2.0,
        jitter: float = 0.2,
        rng: random.Random | None = None,
    ) -> None:
        self.initial = initial
        self.maximum = max(maximum, initial)
        self.multiplier = multiplier
        self.jitter = jitter
        self._rng = rng or random.Random()

    def delay(self, retry_number: int) -> float:
        """Seconds to wait before retry `retry_number` (1 for the second attempt)."""
        try:
            grown = self.initial * self.multiplier ** (retry_number - 1)
        except OverflowError:  # past ~1000 retries the float overflows: it is capped anyway
            grown = self.maximum
        base = min(self.maximum, grown)
        return base * (1.0 - self.jitter * self._rng.random())
