"""The asyncio loop, on a daemon thread of ours, that runs every embedded grpc.aio server.

One loop for the process, started on first use and never stopped: grpcio's aio engine
binds its completion-queue poller to the first loop that uses it (events of other loops
are passed on through that one), so a loop that stopped would leave later servers deaf.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run", "server_loop"]

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def server_loop() -> asyncio.AbstractEventLoop:
    """The process's server loop (started on the first call)."""
    global _loop
    with _lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(
                target=loop.run_forever, name="mq-bridge-grpc-loop", daemon=True
            ).start()
            _loop = loop
        return _loop


def run(coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run `coroutine` on the server loop and return its result (from another thread)."""
    return asyncio.run_coroutine_threadsafe(coroutine, server_loop()).result(timeout)
