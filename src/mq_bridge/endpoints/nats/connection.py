"""The `nats` endpoint's client: one nats-py connection per server and credentials, shared
through `BuildContext.connections` and run on the kit's asyncio loop thread.

The hot paths (JetStream publishes, pull requests, acks) do not come here on plain
``nats://`` servers: `direct.DirectLink` serves them on the caller's thread (see `link`).

nats-py turns every delivery into a `Msg` object, parses its headers and queues it for a
subscription task: about 20 µs a message. The subscriptions the endpoint reads itself
(pull replies, PubAcks, request replies, core subscriptions) skip that: `FastClient`
hands their raw bytes straight to a callback on the loop thread. Everything else (the
JetStream API calls) takes nats-py's ordinary path. Writes that need no answer are
appended to the client's outgoing buffer with `FastClient.write` (one loop hop, no
coroutine), which nats-py's flusher sends; across a reconnect nats-py keeps the buffer and
sends it once connected again.

Connecting: a refused or unreachable server fails `connect()` within about
`CONNECT_TIMEOUT` (two attempts), as `EndpointUnavailableError`; once connected, the
client reconnects forever, `RECONNECT_WAIT` apart, and re-subscribes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import nats.errors
from nats.aio.client import Client

from mq_bridge.endpoints.kit.connections import Lease, connection_key
from mq_bridge.endpoints.kit.event_loop import loop_thread
from mq_bridge.endpoints.kit.tls import ssl_context
from mq_bridge.endpoints.nats.options import NatsOptions
from mq_bridge.errors import ConfigError, EndpointError, EndpointUnavailableError

__all__ = [
    "API_TIMEOUT",
    "FastClient",
    "RawHandler",
    "acquire_client",
    "run",
]

log = logging.getLogger("mq_bridge.endpoints.nats")

T = TypeVar("T")
#: ``handler(subject, reply, payload, header_block)``, called on the loop thread.
RawHandler = Callable[[bytes, bytes, bytes, "bytes | None"], None]

CONNECT_TIMEOUT = 3.0
#: Bound on each JetStream API call and each flush.
API_TIMEOUT = 5.0
RECONNECT_WAIT = 0.5
_MAX_BUFFERED = 8 * 1024 * 1024  # bytes kept for sending while reconnecting


class FastClient(Client):
    """A nats-py client that passes the messages of some subscriptions to raw handlers."""

    def __init__(self) -> None:
        super().__init__()
        self.raw_handlers: dict[int, RawHandler] = {}

    async def _process_msg(
        self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None
    ) -> None:
        handler = self.raw_handlers.get(sid)
        if handler is None:
            await super()._process_msg(sid, subject, reply, data, headers)  # type: ignore[arg-type]
            return
        try:
            handler(subject, reply, data, headers)
        except Exception:  # a handler bug must not kill the connection's read loop
            log.exception("nats: handling a message on %r failed", subject)

    def write(self, data: bytes) -> None:
        """Queue protocol bytes for sending (on the loop thread); nats-py's flusher sends
        them. Raises when the connection is closed, or its reconnect buffer is full."""
        if self.is_closed:
            raise nats.errors.ConnectionClosedError
        if not self.is_connected and self._pending_data_size + len(data) > _MAX_BUFFERED:
            raise nats.errors.OutboundBufferLimitError
        if self.is_connected and not self._pending and self._transport is not None:
            # Nothing queued before it: straight to the socket, a loop turn sooner than
            # the flusher task would write it (the order of writes is kept either way).
            self._transport.write(data)
            return
        self._pending.append(data)
        self._pending_data_size += len(data)
        queue = self._flush_queue
        if self.is_connected and queue is not None and queue.empty():
            queue.put_nowait(asyncio.get_running_loop().create_future())

    async def raw_subscribe(self, subject: str, handler: RawHandler, queue: str = "") -> Any:
        """Subscribe `subject`, its messages going to `handler`; the subscription."""
        subscription = await self.subscribe(subject, queue=queue)
        self.raw_handlers[subscription._id] = handler
        return subscription

    async def raw_unsubscribe(self, subscription: Any) -> None:
        self.raw_handlers.pop(subscription._id, None)
        if not self.is_closed:
            await subscription.unsubscribe()


def run(coro: Coroutine[Any, Any, T], what: str, timeout: float = API_TIMEOUT) -> T:
    """Run `coro` on the loop thread; broker trouble becomes our errors, naming `what`."""
    try:
        return loop_thread().run(coro, timeout)
    except (TimeoutError, asyncio.TimeoutError, nats.errors.TimeoutError) as error:
        raise EndpointUnavailableError(f"{what}: no answer within {timeout:g} s") from error
    except (
        nats.errors.ConnectionClosedError,
        nats.errors.NoRespondersError,
        nats.errors.OutboundBufferLimitError,
        nats.errors.StaleConnectionError,
        OSError,
    ) as error:
        raise EndpointUnavailableError(f"{what}: {error!r}") from error


def acquire_client(options: NatsOptions, connections: Any) -> Lease[FastClient]:
    """A lease on the client for `options`' server and credentials (`shared`: one per
    process; else a private one)."""
    tls = ssl_context(options.tls, options.servers[0], path="nats.tls")
    key = connection_key(
        "nats",
        url=options.url,
        username=options.username,
        password=options.password,
        token=options.token,
        tls=options.tls,
    )
    lease: Lease[FastClient] = connections.acquire(
        key, lambda: _open(options, tls), _close, shared=options.shared is not False
    )
    return lease


def _open(options: NatsOptions, tls: Any) -> FastClient:
    where = ", ".join(_redacted(server) for server in options.servers)
    try:
        return loop_thread().run(_connect(options, tls), 2 * CONNECT_TIMEOUT + 2)
    except (nats.errors.NoServersError, OSError, TimeoutError, asyncio.TimeoutError) as error:
        cause = getattr(error, "__cause__", None) or error
        if _refused(cause):
            message = f"the server {where} refused the credentials"
            raise ConfigError(message, "nats.username") from error
        raise EndpointUnavailableError(f"nats: cannot connect to {where}: {cause!r}") from error
    except nats.errors.Error as error:
        if _refused(error):
            message = f"the server {where} refused the credentials"
            raise ConfigError(message, "nats.username") from error
        raise EndpointError(f"nats: cannot connect to {where}: {error!r}") from error


async def _connect(options: NatsOptions, tls: Any) -> FastClient:
    client = FastClient()
    last_error: list[BaseException] = []

    async def on_error(error: Exception) -> None:
        # A refused login is the error that explains the others: the server may reset the
        # retry's connection instead of answering it, which must not hide the refusal.
        if not (last_error and _refused(last_error[0])):
            last_error[:] = [error]
        log.debug("nats: %r", error)

    async def on_disconnect() -> None:
        if not client.is_closed:  # not our own close
            log.warning("nats: disconnected from the server; reconnecting")

    async def on_reconnect() -> None:
        log.warning("nats: reconnected")

    try:
        await client.connect(
            servers=options.servers,
            user=options.username,
            password=options.password,
            token=options.token,
            tls=tls,
            name="mq-bridge-py",
            connect_timeout=int(CONNECT_TIMEOUT),
            allow_reconnect=True,
            max_reconnect_attempts=1,  # the first connect: fail fast; see below
            reconnect_time_wait=0.1,  # type: ignore[arg-type]
            error_cb=on_error,
            disconnected_cb=on_disconnect,
            reconnected_cb=on_reconnect,
        )
    except nats.errors.NoServersError as error:
        raise error from (last_error[0] if last_error else None)
    # Connected: from now on a lost connection is reconnected, forever, with a pause.
    client.options["max_reconnect_attempts"] = -1
    client.options["reconnect_time_wait"] = RECONNECT_WAIT
    return client


def _refused(error: BaseException) -> bool:
    return "authorization" in str(error).lower()


def _close(client: FastClient) -> None:
    if not client.is_closed:
        loop_thread().run(client.close(), API_TIMEOUT)


def _redacted(server: str) -> str:
    if "@" not in server:
        return server
    scheme, rest = server.split("://", 1) if "://" in server else ("nats", server)
    return f"{scheme}://***@{rest.rsplit('@', 1)[1]}"
