"""What tests of every package need: a free loopback port, and a bounded wait.

    port = free_port()                                   # nothing listens there right now
    assert wait_until(lambda: len(got) == 3)             # True once it holds, False at 30 s
    wait_until(server_up, 60, failing="server is down")  # raises TimeoutError instead

Helpers tied to one package live beside its tests (`tests/mq_bridge/helpers.py`,
`tests/brokers.py`, `tests/peers.py`); this module imports neither package.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

__all__ = ["free_port", "wait_until"]


def free_port(host: str = "127.0.0.1") -> int:
    """A port on `host` nothing listens on right now (the kernel picks one, then we let go)."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def wait_until(
    condition: Callable[[], object],
    timeout: float = 30.0,
    step: float = 0.005,
    failing: str | None = None,
) -> bool:
    """Poll `condition()` every `step` seconds until it is true (True) or `timeout` passes:
    then False, or with `failing` a `TimeoutError` that says what did not happen."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            if failing is not None:
                raise TimeoutError(f"{failing} (waited {timeout:.0f}s)")
            return False
        time.sleep(step)
    return True
