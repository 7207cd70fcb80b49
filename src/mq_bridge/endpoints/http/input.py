"""The http input: an HTTP server whose requests are the route's messages.

    client --POST--> listener loop, driven by the route thread (`handoff`) --> handler
                     |                                                           |
                     '<-- 200 + reply <-- reply registry <------------ `response` output
                     '<-- 202 when the batch is acked without a reply for it
                     '<-- 500 + why, when the route gave up on it (`codec.failure_text`)
                     '<-- 500 when it is nacked, 504 after `request_timeout_ms`

A request becomes a message (`codec.message_from_request`) with a ``correlation_id`` of
ours, unique in the process (a client cannot pick another client's reply), registered in
the process's reply registry. The route thread runs the listener's loop while it waits for
requests, so nothing crosses a thread on the way in or out (`handoff`, `server`).

Guards, before any body is read: `concurrency_limit` requests in flight per input (503
beyond), `basic_auth` (401; the whole ``Authorization`` value is compared in constant
time, so neither its length nor which part was wrong leaks), `max_body_bytes` (413, also
after gzip decompression). The body read and the wait for the reply together have
`request_timeout_ms`. A request aiohttp cannot parse gets 400, one log line (rate-limited)
and a count in the status details (``malformed_requests``, for the whole listener).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import itertools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mq_bridge.endpoints.base import Batch, BuildContext, EndpointStatus, InputEndpoint
from mq_bridge.endpoints.http import codec
from mq_bridge.endpoints.http.deadlines import BodyTimeout, Deadline, Deadlines
from mq_bridge.endpoints.http.options import HttpOptions
from mq_bridge.endpoints.kit.bad_requests import describe, is_malformed_request
from mq_bridge.endpoints.kit.handoff import Handoff
from mq_bridge.endpoints.kit.listener import listen_address
from mq_bridge.endpoints.kit.replies import ReplyWaiter
from mq_bridge.errors import ClosedError, ConfigError
from mq_bridge.message import Message

if TYPE_CHECKING:
    from aiohttp import web

    from mq_bridge.endpoints.kit.listener import Listener

__all__ = ["HttpInput"]

_ACCEPTED = 202
_FAILED = 500
#: The body of each answer without a reply (the peer's texts where it has one).
_STATUS_TEXT = {
    202: "Message processed",
    500: "Message processing failed",
    503: "The input was closed",
    504: "Request timed out",
}


#: ``http_version`` of the usual versions (aiohttp's `HttpVersion` tuples).
_VERSIONS = {(1, 1): "HTTP/1.1", (1, 0): "HTTP/1.0"}


class _TooLarge(Exception):
    pass


class _Pending(ReplyWaiter):
    """One request waiting for its reply (or for its batch's ack) on the loop."""

    __slots__ = ("_input", "future", "settled")

    def __init__(self, correlation_id: str, future: asyncio.Future[Any], owner: HttpInput) -> None:
        # No super().__init__(): its threading.Event (a lock and a condition per request)
        # is for waiting threads; this waiter is awaited on the loop through `future`.
        self.correlation_id = correlation_id
        self.reply = None
        self.future = future
        #: An outcome is on its way to the loop (the batch's ack needs to send none).
        self.settled = False
        self._input = owner

    def complete(self, reply: Message) -> None:
        """On the route thread: the `response` output answered."""
        self.settled = True
        self._input._handoff.settle(self, (200, reply))

    def fail(self, error: BaseException) -> None:
        """The route dropped the request (a handler or output failure that is not
        retriable): 500 with the reason. Called by a runtime that reports drops to the
        reply registry."""
        self.settled = True
        self._input._handoff.settle(self, (_FAILED, codec.failure_text(error)))

    def resolve(self, outcome: tuple[int, Message | str | None]) -> None:
        """On the loop: the request's outcome (the first one counts)."""
        if not self.future.done():
            self.future.set_result(outcome)


class HttpInput(InputEndpoint):
    """Requests to `path` on the listener at `url` (see the module docstring)."""

    acks_in_any_order = True
    redelivers = False  # a nack answers the client; it cannot send the request again

    def __init__(self, options: HttpOptions, context: BuildContext) -> None:
        self._options = options
        self._replies = context.replies
        self._host, self._port, self._tls_by_scheme = listen_address(options.url)
        self._method = options.upper_method
        self._id_header = (options.message_id_header or codec.MESSAGE_ID_HEADER).lower()
        self._limit = options.concurrency_limit or 0
        self._max_body = options.max_body_bytes or 0
        self._timeout = options.request_timeout
        self._expected_auth = _auth_digest(options.basic_auth)
        self._response_headers = dict(options.custom_headers or {})
        self._compress_from = (
            options.compression_threshold_bytes or 0 if options.compression_enabled else None
        )
        self._prefix = f"http-{os.urandom(6).hex()}-"
        self._counter = itertools.count()
        self._handoff: Handoff[tuple[Message, _Pending | None]] = Handoff("http")
        self._deadlines: Deadlines | None = None
        self._in_flight = 0
        self._listener: Listener | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._respond: Callable[..., web.Response] = _unconnected

    # -- lifecycle (any thread) --------------------------------------------------------

    def connect(self) -> None:
        if self._listener is not None:
            return
        from mq_bridge.endpoints.kit.drivers import require_driver
        from mq_bridge.endpoints.kit.listener import attach, server_ssl_context

        require_driver("aiohttp", endpoint="http", extra="http")
        from aiohttp import web

        # Looked up once: an import statement per request costs more than our dispatch.
        self._respond = web.Response
        ssl_context = server_ssl_context(self._options.tls, self._options.url)
        if self._options.server_protocol == "http2_only":
            raise ConfigError(
                "this http server speaks HTTP/1.x only: use server_protocol auto or http1_only",
                path="http.server_protocol",
            )
        listener = attach(
            self._host,
            self._port,
            ssl_context,
            self._options.header_read_timeout,
            self._options.path,
            self._method,
            self._handle,
        )
        self._loop = listener.loop
        self._deadlines = None if self._timeout is None else Deadlines(listener.loop, self._timeout)
        self._handoff = Handoff("http")
        self._handoff.listener = listener
        self._listener = listener

    @property
    def port(self) -> int:
        """The port listened on (useful with port 0 in the url)."""
        if self._listener is None:
            raise ClosedError("the http input is not connected")
        return self._listener.bound_port

    def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is None:
            return
        from mq_bridge.endpoints.kit.listener import detach

        handoff = self._handoff
        handoff.interrupt()
        # Requests received but never handed out get 503; then the listener (if this was
        # its last input) stops, which answers what is in flight or drops it.
        while handoff.queue:
            _, pending = handoff.queue.popleft()
            if pending is not None:
                handoff.settle(pending, (503, None))
        listener.run(_applied(handoff), 10.0)
        handoff.listener = None
        if self._deadlines is not None:
            self._deadlines.stop()
        detach(listener, self._options.path, self._method, self._handle)

    def describe(self) -> str:
        return f"http:{self._host}:{self._port}{self._options.path or ''}"

    def status(self) -> EndpointStatus:
        return EndpointStatus(
            healthy=self._listener is not None,
            target=self.describe(),
            pending=len(self._handoff.queue),
            capacity=self._limit or None,
            details={"in_flight": self._in_flight, "malformed_requests": self._malformed()},
        )

    def _malformed(self) -> int:
        """Malformed requests answered 400 on this input's listener (every input on it)."""
        listener = self._listener
        return 0 if listener is None else listener.bad_requests.count

    # -- the route thread --------------------------------------------------------------

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        items = self._handoff.take(max_messages, timeout)
        messages = [message for message, _ in items]
        token = [pending for _, pending in items if pending is not None]
        return Batch(messages, token)

    def ack(self, batch: Batch) -> None:
        settle = self._handoff.settle
        for pending in batch.token or ():
            if not pending.settled:
                pending.settled = True
                settle(pending, (_ACCEPTED, None))

    def nack(self, batch: Batch) -> None:
        for pending in batch.token or ():
            self._handoff.settle(pending, (_FAILED, None))

    def interrupt(self) -> None:
        self._handoff.interrupt()

    # -- the loop ----------------------------------------------------------------------

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        respond = self._respond
        if self._limit and self._in_flight >= self._limit:
            return respond(status=503, text="Too many concurrent requests")
        if self._expected_auth is not None and not _authorized(request, self._expected_auth):
            return respond(
                status=401,
                text="Unauthorized",
                headers={"WWW-Authenticate": 'Basic realm="mq-bridge"'},
            )
        self._in_flight += 1
        deadline = None if self._deadlines is None else self._deadlines.track(request)
        try:
            return await self._exchange(request, deadline)
        except (BodyTimeout, asyncio.TimeoutError):
            return respond(status=504, text=_STATUS_TEXT[504])
        except _TooLarge:
            return respond(status=413, text="Request body too large")
        except Exception as error:  # a body aiohttp could not parse (broken chunked framing)
            if not is_malformed_request(error) or self._listener is None:
                raise
            self._listener.bad_requests.note(request.remote, describe(error), error)
            return respond(status=400, text="Bad request")
        finally:
            self._in_flight -= 1
            if deadline is not None:
                deadline.finished = True

    async def _exchange(
        self, request: web.BaseRequest, deadline: Deadline | None
    ) -> web.StreamResponse:
        if self._options.receive_streamable:
            if deadline is not None:
                deadline.finished = True  # a stream may last: each chunk has the timeout
            return await self._receive_stream(request)
        body = await self._read_body(request)
        if self._options.fire_and_forget:
            message = self._message(request, body, None)
            self._handoff.put((message, None))
            return self._respond(status=_ACCEPTED, text="Message accepted")
        correlation_id = f"{self._prefix}{next(self._counter)}"
        message = self._message(request, body, correlation_id)
        assert self._loop is not None
        future: asyncio.Future[Any] = self._loop.create_future()
        if deadline is not None:
            deadline.outcome = future
        pending = _Pending(correlation_id, future, self)
        self._replies.register(pending)
        try:
            self._handoff.put((message, pending))
            status, reply = await future
        finally:
            self._replies.forget(pending)
        if isinstance(reply, Message):
            return self._reply_response(request, reply, message)
        return self._respond(
            status=status,
            text=reply or _STATUS_TEXT[status],
            headers=self._response_headers or None,
        )

    async def _receive_stream(self, request: web.BaseRequest) -> web.StreamResponse:
        """`receive_streamable`: each item of the body is a message (SSE events, else
        lines). The answer, once the body ended: 202 when every item was acked, 500 when
        one was not; items are never answered one by one (replies to them are dropped)."""
        from mq_bridge.endpoints.http.streaming import ItemSplitter, stream_format

        fmt = stream_format(request.headers.get("Content-Type")) or "ndjson"
        splitter = ItemSplitter(fmt)
        assert self._loop is not None
        outcomes: list[asyncio.Future[Any]] = []
        index = 0

        def enqueue(items: list[tuple[bytes, dict[str, str]]]) -> None:
            nonlocal index
            for payload, fields in items:
                if self._max_body and len(payload) > self._max_body:
                    raise _TooLarge
                fields = {**fields, "http_stream_index": str(index), "http_stream_format": fmt}
                message = self._message(request, payload, None, fields)
                index += 1
                future: asyncio.Future[Any] = self._loop.create_future()  # type: ignore[union-attr]
                pending = _Pending(f"{self._prefix}{next(self._counter)}", future, self)
                outcomes.append(future)
                self._handoff.put((message, pending))

        content = request.content
        while True:
            chunk = await asyncio.wait_for(content.readany(), self._timeout)
            if not chunk:
                break
            enqueue(splitter.feed(chunk))
        enqueue(splitter.finish())
        statuses = [status for status, _ in await asyncio.gather(*outcomes)]
        status = _ACCEPTED if all(s in (200, _ACCEPTED) for s in statuses) else _FAILED
        headers = {"X-Stream-Items": str(index), **self._response_headers}
        return self._respond(status=status, text=_STATUS_TEXT[status], headers=headers)

    def _message(
        self,
        request: web.BaseRequest,
        body: bytes,
        correlation_id: str | None,
        extra: dict[str, str] | None = None,
    ) -> Message:
        """The request's message. A stream item (`extra` set) gets an id of its own: the
        request's `message_id_header` would give every item the same one."""
        version = _VERSIONS.get(request.version) or "HTTP/{}.{}".format(*request.version)
        return codec.message_from_request(
            body,
            request.headers.items(),
            (request.method, request.path, request.query_string, version),
            self._id_header if extra is None else "",
            correlation_id,
            extra,
        )

    async def _read_body(self, request: web.BaseRequest) -> bytes:
        limit = self._max_body
        length = request.content_length
        if limit and length is not None and length > limit:
            raise _TooLarge
        if not request.body_exists:
            return b""
        content = request.content
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = await content.readany()
            if not chunk:
                break
            size += len(chunk)
            if limit and size > limit:
                raise _TooLarge
            chunks.append(chunk)
            if content.at_eof():  # no empty read to learn it (the usual one-chunk body)
                break
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _reply_response(
        self, request: web.BaseRequest, reply: Message, message: Message
    ) -> web.Response:
        headers = codec.reply_headers(reply, message)
        if self._response_headers:
            headers.update(self._response_headers)
        body = reply.payload
        threshold = self._compress_from
        if (
            threshold is not None
            and len(body) >= threshold
            and "gzip" in request.headers.get("Accept-Encoding", "")
        ):
            body = codec.gzip_body(body)
            headers["Content-Encoding"] = "gzip"
            headers["Vary"] = "Accept-Encoding"
        return self._respond(status=200, body=body, headers=headers)


def _unconnected(**_: Any) -> web.Response:
    raise ClosedError("the http input is not connected")


async def _applied(handoff: Handoff[Any]) -> None:
    """On the loop: apply the outcomes queued so far, and let their answers go out."""
    handoff.flush_now()
    await asyncio.sleep(0)


def _auth_digest(credentials: tuple[str, str] | None) -> bytes | None:
    if credentials is None:
        return None
    token = base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode("ascii")
    return hashlib.sha256(f"Basic {token}".encode()).digest()


def _authorized(request: web.BaseRequest, expected: bytes) -> bool:
    """Digests of equal length compared in constant time: nothing about the value leaks."""
    given = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
    return hmac.compare_digest(hashlib.sha256(given).digest(), expected)
