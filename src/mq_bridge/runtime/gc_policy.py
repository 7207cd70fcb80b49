"""The MQ_BRIDGE_PY_GC_MODE knob: how the cyclic garbage collector behaves while routes run.

    default   leave CPython's GC alone
    count     disable automatic GC while any route runs; collect every `threshold` messages
    off       disable automatic GC while any route runs (pure reference counting)

Automatic GC is restored when the last route that disabled it stops.
"""

from __future__ import annotations

import gc
import threading

__all__ = ["GcPolicy"]

_lock = threading.Lock()
_disablers = 0
_was_enabled = True


class GcPolicy:
    """Applied by a route thread: `begin()` at start, `tick(n)` per batch, `end()` at stop."""

    def __init__(self, mode: str, threshold: int) -> None:
        self.mode = mode
        self._threshold = max(threshold, 1)
        self._seen = 0

    def begin(self) -> None:
        global _disablers, _was_enabled
        if self.mode == "default":
            return
        with _lock:
            if _disablers == 0:
                _was_enabled = gc.isenabled()
                gc.disable()
            _disablers += 1

    def tick(self, messages: int) -> None:
        if self.mode != "count":
            return
        self._seen += messages
        if self._seen >= self._threshold:
            self._seen = 0
            gc.collect()

    def end(self) -> None:
        global _disablers
        if self.mode == "default":
            return
        with _lock:
            _disablers -= 1
            if _disablers == 0 and _was_enabled:
                gc.enable()
