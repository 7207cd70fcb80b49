"""The http output: POSTs (or `method`) each message to `url` through a pooled client.

`send` returns once every message got a 2xx response: a returning send means the server
accepted each one. A non-2xx status is `HttpStatusError` (retriable, as for mq-bridge,
unless `pass_through_status`), a refused or lost connection `EndpointUnavailableError`,
no response within `request_timeout_ms` `RequestTimeoutError` (both retriable). A batch
goes out `batch_concurrency` requests at a time; the failures of a batch are one
`SendError` with a cause per failed message.

`request` returns the response as a message: the body, the response headers (names
lower-cased) and ``http_status`` as metadata, the request's id.

The client is aiohttp's, on the process's asyncio loop thread, with keep-alive pooling;
with `shared` (the default) every http output of the process with the same TLS and pool
settings uses one client (one pool). It is closed when its last user closes, or at
interpreter exit when one never did (no "Unclosed client session" from aiohttp).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mq_bridge.endpoints.base import BuildContext, OutputEndpoint
from mq_bridge.endpoints.http import codec
from mq_bridge.endpoints.http.options import HttpOptions
from mq_bridge.endpoints.kit.connections import Lease, connection_key
from mq_bridge.endpoints.kit.event_loop import loop_thread
from mq_bridge.endpoints.kit.tls import ssl_context
from mq_bridge.errors import (
    ClosedError,
    EndpointError,
    EndpointUnavailableError,
    RequestTimeoutError,
    SendError,
)
from mq_bridge.message import Message

if TYPE_CHECKING:
    import aiohttp

__all__ = ["HttpOutput", "HttpStatusError"]

#: Connections per shared client (per host: aiohttp's pool is keyed by host).
POOL_LIMIT = 256


class HttpStatusError(EndpointError):
    """The server answered with a non-2xx status (retriable: mq-bridge retries them too)."""

    retriable = True

    def __init__(self, url: str, status: int, body: bytes) -> None:
        excerpt = body[:200].decode("utf-8", "replace")
        super().__init__(f"http: {url} answered {status}: {excerpt}")
        self.status = status


class HttpOutput(OutputEndpoint):
    """Sends each message as one HTTP request (see the module docstring)."""

    def __init__(self, options: HttpOptions, context: BuildContext) -> None:
        self._options = options
        self._context = context
        self._url = options.url if "://" in options.url else f"http://{options.url}"
        self._method = options.upper_method or "POST"
        self._timeout = options.request_timeout
        self._concurrency = options.batch_concurrency or 1
        self._custom = dict(options.custom_headers or {})
        if options.basic_auth is not None:
            import base64

            user, password = options.basic_auth
            token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            self._custom["Authorization"] = f"Basic {token}"
        self._gzip_from = (
            options.compression_threshold_bytes or 0 if options.gzip_requests else None
        )
        self._lease: Lease[aiohttp.ClientSession] | None = None
        self._stream: Any = None

    def connect(self) -> None:
        if self._lease is not None:
            return
        from mq_bridge.endpoints.kit.drivers import require_driver

        require_driver("aiohttp", endpoint="http", extra="http")
        context = ssl_context(self._options.tls, self._url, path="http.tls")
        key = connection_key(
            "http",
            tls=self._options.tls,
            idle=self._options.pool_idle_timeout_ms,
            keepalive=self._options.tcp_keepalive_ms,
        )
        idle = (self._options.pool_idle_timeout_ms or 0) / 1000
        self._lease = self._context.connections.acquire(
            key,
            lambda: loop_thread().run(_open_session(context, idle), 10.0),
            _close_session,
            shared=bool(self._options.shared),
            close_at_exit=True,
        )
        if self._options.stream_response_to is not None:
            from mq_bridge.endpoints.http.streaming import ResponseStreamer

            self._stream = ResponseStreamer(self._options.stream_response_to, self._context)

    def close(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.release()
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()

    def describe(self) -> str:
        return f"http:{self._method} {self._url.split('@')[-1]}"

    def send(self, messages: Sequence[Message]) -> None:
        if len(messages) == 1:
            self.send_one(messages[0])
            return
        failures = loop_thread().run(self._send_all(messages))
        if failures:
            raise SendError(failures)

    def send_one(self, message: Message) -> None:
        loop_thread().run(self._exchange(message, want_reply=False))

    def request(self, message: Message, timeout: float | None) -> Message:
        limit = self._timeout if timeout is None else timeout
        reply = loop_thread().run(self._exchange(message, want_reply=True, timeout=limit))
        assert reply is not None
        return reply

    async def _send_all(self, messages: Sequence[Message]) -> dict[int, BaseException]:
        gate = asyncio.Semaphore(self._concurrency)
        failures: dict[int, BaseException] = {}

        async def one(index: int, message: Message) -> None:
            async with gate:
                try:
                    await self._exchange(message, want_reply=False)
                except Exception as error:
                    failures[index] = error

        await asyncio.gather(*(one(i, m) for i, m in enumerate(messages)))
        return failures

    async def _exchange(
        self, message: Message, *, want_reply: bool, timeout: float | None = None
    ) -> Message | None:
        import aiohttp

        try:
            return await self._exchange_once(message, want_reply, timeout)
        except aiohttp.ServerDisconnectedError:
            # The keep-alive race: the server closed a pooled connection just as it was
            # reused. Once more on a fresh connection (at-least-once, as a route's retry).
            try:
                return await self._exchange_once(message, want_reply, timeout)
            except aiohttp.ServerDisconnectedError as error:
                raise EndpointUnavailableError(f"http: {self._url}: {error}") from None

    async def _exchange_once(
        self, message: Message, want_reply: bool, timeout: float | None
    ) -> Message | None:
        import aiohttp

        if self._lease is None:
            raise ClosedError("the http output is closed (or not connected yet)")
        session = self._lease.connection
        headers = codec.request_headers(message, self._custom)
        body = message.payload
        if self._gzip_from is not None and len(body) >= self._gzip_from:
            body = codec.gzip_body(body)
            headers["Content-Encoding"] = "gzip"
        limit = self._timeout if timeout is None else timeout
        try:
            async with session.request(
                self._method,
                self._url,
                data=body,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=limit),
            ) as response:
                if self._stream is not None and self._stream.streams(response):
                    await self._stream.forward(response, message)
                    payload = b""
                else:
                    payload = await response.read()
                status = response.status
                if not 200 <= status < 300 and not self._options.pass_through_status:
                    raise HttpStatusError(self._url, status, payload)
                if not want_reply:
                    return None
                return codec.message_from_response(
                    payload, status, response.headers.items(), message
                )
        except (asyncio.TimeoutError, TimeoutError):
            raise RequestTimeoutError(
                f"http: no response from {self._url} within {limit} s"
            ) from None
        except aiohttp.ServerDisconnectedError:
            raise
        except aiohttp.ClientConnectionError as error:
            raise EndpointUnavailableError(f"http: {self._url}: {error}") from None


async def _open_session(context: Any, idle_timeout: float) -> aiohttp.ClientSession:
    import aiohttp

    ssl: Any = context if context is not None else True
    if idle_timeout:
        connector = aiohttp.TCPConnector(limit=POOL_LIMIT, keepalive_timeout=idle_timeout, ssl=ssl)
    else:  # pool_idle_timeout_ms: 0 keeps no idle connection
        connector = aiohttp.TCPConnector(limit=POOL_LIMIT, force_close=True, ssl=ssl)
    # No cookie jar: a bridge must not carry one message's cookies into the next.
    return aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar())


def _close_session(session: aiohttp.ClientSession) -> None:
    loop_thread().run(session.close(), 10.0)
