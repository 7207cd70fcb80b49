"""Connecting a route's endpoints within `startup_timeout_ms`, so `start()` can raise.

A server that refuses connections at start (a broker still starting, restarting) is tried
again with backoff until the bound; an error that no reconnect cures (a bad config, a
refused login) raises at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from mq_bridge.endpoints.base import InputEndpoint, OutputEndpoint
from mq_bridge.endpoints.kit.backoff import Backoff
from mq_bridge.errors import EndpointUnavailableError
from mq_bridge.runtime.failures import is_reconnectable

__all__ = ["connect_all"]

Endpoint = InputEndpoint | OutputEndpoint
_BACKOFF = Backoff(0.05, 1.0, 2.0, 0.2)


def connect_all(
    endpoints: Sequence[Endpoint],
    timeout: float,
    route_name: str,
    stopping: threading.Event | None = None,
) -> None:
    """Connect each endpoint in order; raise its error, or a timeout naming the endpoint.

    Connecting runs on a helper thread so a server that never answers cannot hang
    `start()`; on failure every endpoint is closed again.
    """
    failure: list[BaseException] = []
    done = threading.Event()
    given_up = threading.Event()
    deadline = time.monotonic() + timeout if timeout > 0 else None

    def connect_one(endpoint: Endpoint) -> None:
        attempt = 0
        while True:
            try:
                endpoint.connect()
                return
            except Exception as error:
                attempt += 1
                wait = _BACKOFF.delay(attempt)
                late = deadline is not None and time.monotonic() + wait >= deadline
                if not is_reconnectable(error) or late or given_up.is_set():
                    raise
                _close_quietly([endpoint])
                if given_up.wait(wait) or (stopping is not None and stopping.is_set()):
                    raise

    def connect() -> None:
        try:
            for endpoint in endpoints:
                connect_one(endpoint)
        except BaseException as error:
            failure.append(error)
        finally:
            done.set()

    threading.Thread(target=connect, name=f"{route_name}-connect", daemon=True).start()
    finished = done.wait(timeout if timeout > 0 else None)
    if finished and not failure:
        return
    given_up.set()
    _close_quietly(endpoints)
    if failure:
        raise failure[0]
    names = ", ".join(e.describe() for e in endpoints)
    raise EndpointUnavailableError(
        f"route {route_name!r}: endpoints ({names}) did not connect within "
        f"startup_timeout_ms={timeout * 1000:.0f}"
    )


def _close_quietly(endpoints: Sequence[Endpoint]) -> None:
    for endpoint in endpoints:
        try:
            endpoint.close()
        except Exception:
            pass
