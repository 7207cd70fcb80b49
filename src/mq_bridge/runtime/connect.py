"""Connecting a route's endpoints within `startup_timeout_ms`, so `start()` can raise."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from mq_bridge.endpoints.base import InputEndpoint, OutputEndpoint
from mq_bridge.errors import EndpointUnavailableError

__all__ = ["connect_all"]


def connect_all(
    endpoints: Sequence[InputEndpoint | OutputEndpoint], timeout: float, route_name: str
) -> None:
    """Connect each endpoint in order; raise its error, or a timeout naming the endpoint.

    Connecting runs on a helper thread so a server that never answers cannot hang
    `start()`; on failure every endpoint is closed again.
    """
    failure: list[BaseException] = []
    done = threading.Event()

    def connect() -> None:
        try:
            for endpoint in endpoints:
                endpoint.connect()
        except BaseException as error:
            failure.append(error)
        finally:
            done.set()

    threading.Thread(target=connect, name=f"{route_name}-connect", daemon=True).start()
    finished = done.wait(timeout if timeout > 0 else None)
    if finished and not failure:
        return
    _close_quietly(endpoints)
    if failure:
        raise failure[0]
    names = ", ".join(e.describe() for e in endpoints)
    raise EndpointUnavailableError(
        f"route {route_name!r}: endpoints ({names}) did not connect within "
        f"startup_timeout_ms={timeout * 1000:.0f}"
    )


def _close_quietly(endpoints: Sequence[InputEndpoint | OutputEndpoint]) -> None:
    for endpoint in endpoints:
        try:
            endpoint.close()
        except Exception:
            pass
