"""The connection the publisher and the pull reader send and wait on: a `Link`.

`open_link` picks `direct.DirectLink` (a synchronous client on the caller's thread: no
thread hop per call) for plain ``nats://`` servers, and `LoopLink` (the shared nats-py
client on the loop thread) for TLS and WebSocket servers. Both hand raw messages to
handlers (``handler(subject, reply, payload, header_block)``) and never block unbounded.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Protocol

from mq_bridge.endpoints.kit.event_loop import loop_thread
from mq_bridge.endpoints.kit.tls import tls_required
from mq_bridge.endpoints.nats.connection import API_TIMEOUT, FastClient, RawHandler, run
from mq_bridge.endpoints.nats.options import NatsOptions
from mq_bridge.errors import EndpointUnavailableError

__all__ = ["Link", "LoopLink", "open_link"]

log = logging.getLogger("mq_bridge.endpoints.nats")


class Link(Protocol):
    """What `output` and `pull` need of a connection."""

    @property
    def max_payload(self) -> int: ...

    @property
    def is_connected(self) -> bool: ...

    @property
    def generation(self) -> int:
        """Changes when the connection is lost or made again: a request sent before is
        not answered after."""

    def new_inbox(self) -> str: ...

    def ensure(self, deadline: float | None = None) -> None:
        """Return connected, else raise `EndpointUnavailableError` (by `deadline`)."""

    def subscribe(self, subject: str, handler: RawHandler) -> Any: ...

    def unsubscribe(self, subscription: Any) -> None: ...

    def write(self, data: bytes) -> None:
        """Queue or send protocol bytes, in order."""

    def wait(self, done: threading.Event, timeout: float) -> bool:
        """Until `done` is set (True) or `timeout` passed (False)."""

    def flush(self, timeout: float) -> None:
        """Return once the server has read everything written before."""

    def close(self) -> None: ...


def open_link(options: NatsOptions, client: FastClient) -> Link:
    """A direct link when every server is plain ``nats://`` without TLS, else `LoopLink`."""
    from mq_bridge.endpoints.nats.direct import DirectLink, TlsRequiredError

    plain = all(server.lower().startswith("nats://") for server in options.servers)
    if not plain or tls_required(options.tls):
        return LoopLink(client)
    link = DirectLink(options)
    try:
        link.ensure()
    except TlsRequiredError:  # the server upgrades to TLS: nats-py does that
        link.close()
        return LoopLink(client)
    except BaseException:
        link.close()
        raise
    return link


class LoopLink:
    """The shared nats-py client: writes go through the loop thread, handlers run there."""

    def __init__(self, client: FastClient) -> None:
        self._client = client
        self._call_soon = loop_thread().call_soon

    @property
    def max_payload(self) -> int:
        return int(self._client.max_payload)

    @property
    def is_connected(self) -> bool:
        return bool(self._client.is_connected)

    @property
    def generation(self) -> int:
        return int(self._client.stats["reconnects"])

    def new_inbox(self) -> str:
        return str(self._client.new_inbox())

    def ensure(self, deadline: float | None = None) -> None:
        """Wait for nats-py to be connected (it reconnects by itself)."""
        client = self._client
        until = time.monotonic() + API_TIMEOUT if deadline is None else deadline
        while not client.is_connected:
            if client.is_closed:
                raise EndpointUnavailableError("nats: the connection was closed")
            if time.monotonic() >= until:
                raise EndpointUnavailableError("nats: not connected to the server (reconnecting)")
            time.sleep(0.05)

    def subscribe(self, subject: str, handler: RawHandler) -> Any:
        return run(self._client.raw_subscribe(subject, handler), f"nats: subscribing {subject}")

    def unsubscribe(self, subscription: Any) -> None:
        run(self._client.raw_unsubscribe(subscription), "nats: unsubscribing")

    def write(self, data: bytes) -> None:
        if self._client.is_closed:
            raise EndpointUnavailableError("nats: the connection was closed")
        self._call_soon(self._write_on_loop, data)

    def wait(self, done: threading.Event, timeout: float) -> bool:
        return done.wait(timeout)

    def flush(self, timeout: float) -> None:
        run(self._client.flush(int(max(timeout, 1))), "nats: flush", timeout + 1)

    def close(self) -> None:
        """Nothing of its own: the client belongs to the endpoint's lease."""

    def _write_on_loop(self, data: bytes) -> None:
        try:
            self._client.write(data)
        except Exception as error:  # unanswered: the waiter's timeout reports it
            log.warning("nats: a write was dropped: %r", error)
