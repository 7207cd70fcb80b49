"""The websocket input: a WebSocket server whose frames are the route's messages.

    client --frame--> connection task (asyncio loop thread) --queue--> route thread
           <--frame-- connection writer <-- reply registry <-------- `response` output

The server is aiohttp's, on the shared http listeners (`mq_bridge.endpoints.kit.listener`):
a websocket input registers its `path` for GET on the listener of its address, so http and
websocket inputs can share one port, and the listener's header-read timeout bounds the
upgrade request. The handshake checks `max_connections` (503) and `basic_auth` (401).
A malformed handshake (400) or frame (the connection closes with 1002 or 1009) is logged
as one line (rate-limited) and counted with the listener's malformed HTTP requests in the
status details (``malformed_requests``).

Each connection has a task that reads its frames; every frame becomes a message with a
``correlation_id`` of ours registered in the process's reply registry, so a `response`
output sends the reply on the socket the frame came from. A connection keeps at most
`routed_queue_capacity` frames without an outcome (acked, nacked or answered); past that
it stops reading until the oldest has one, so a fast client cannot grow the queue without
bound (WebSocket flow control then pushes back through TCP). Acks and nacks send nothing:
WebSocket has no negative answer for one frame.

As for the http input, the route thread runs the listener's loop while it waits for frames
(`mq_bridge.endpoints.kit.handoff`), so frames and replies cross no thread. Each
connection has one writer task that sends its replies in order (no task per reply).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import itertools
import os
from collections import deque
from typing import TYPE_CHECKING, Any

from mq_bridge.endpoints.base import Batch, BuildContext, EndpointStatus, InputEndpoint
from mq_bridge.endpoints.kit.bad_requests import describe
from mq_bridge.endpoints.kit.handoff import Handoff
from mq_bridge.endpoints.kit.listener import listen_address
from mq_bridge.endpoints.kit.replies import ReplyWaiter
from mq_bridge.endpoints.websocket import codec
from mq_bridge.endpoints.websocket.options import WebSocketOptions
from mq_bridge.errors import ClosedError, ConfigError
from mq_bridge.message import Message, normalize_message_id

if TYPE_CHECKING:
    from aiohttp import web

    from mq_bridge.endpoints.kit.listener import Listener

__all__ = ["WebSocketInput"]

START_TIMEOUT = 10.0
#: Seconds a client has to send its whole upgrade request (the listener's header timeout,
#: used when the websocket input starts the listener).
HANDSHAKE_TIMEOUT = 10.0


class _Writer:
    """Sends one connection's replies in order, from one task."""

    __slots__ = ("_frames", "_socket", "_wake", "task")

    def __init__(self, socket: web.WebSocketResponse) -> None:
        self._socket = socket
        self._frames: deque[str | bytes] = deque()
        self._wake = asyncio.Event()
        self.task = asyncio.ensure_future(self._run())

    def send(self, data: str | bytes) -> None:
        self._frames.append(data)
        self._wake.set()

    async def _run(self) -> None:
        frames, socket = self._frames, self._socket
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while frames:
                    data = frames.popleft()
                    if isinstance(data, str):
                        await socket.send_str(data)
                    else:
                        await socket.send_bytes(data)
        except (ConnectionError, RuntimeError):
            pass  # the client left: its replies have nowhere to go


class _Pending(ReplyWaiter):
    """One frame waiting for its outcome; a reply goes back through `writer`."""

    __slots__ = ("_input", "future", "writer")

    def __init__(
        self,
        correlation_id: str,
        future: asyncio.Future[Any],
        writer: _Writer,
        owner: WebSocketInput,
    ) -> None:
        # No super().__init__(): its threading.Event is for threads; this one is awaited.
        self.correlation_id = correlation_id
        self.reply = None
        self.future = future
        self.writer = writer
        self._input = owner

    def complete(self, reply: Message) -> None:
        self._input._handoff.settle(self, reply)

    def resolve(self, reply: Message | None) -> None:
        """On the loop: the frame's outcome; a reply goes out on its connection."""
        if self.future.done():
            return
        self.future.set_result(None)
        self._input._replies.forget(self)
        if reply is not None:
            self.writer.send(codec.frame_data(reply))


class WebSocketInput(InputEndpoint):
    """Frames from the connections to `path` on the listener at `url`."""

    acks_in_any_order = True
    redelivers = False  # a frame is not sent twice

    def __init__(self, options: WebSocketOptions, context: BuildContext) -> None:
        self._options = options
        self._replies = context.replies
        self._host, self._port, _ = listen_address(options.url)
        self._id_header = (options.message_id_header or "message-id").lower()
        self._per_connection = options.routed_queue_capacity or 0
        self._max_connections = options.max_connections or 0
        self._expected_auth = _auth_digest(options.basic_auth)
        self._prefix = f"ws-{os.urandom(6).hex()}-"
        self._counter = itertools.count()
        self._handoff: Handoff[tuple[Message, _Pending]] = Handoff("websocket")
        self._connections: set[web.WebSocketResponse] = set()
        self._listener: Listener | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- lifecycle --------------------------------------------------------------------

    def connect(self) -> None:
        if self._listener is not None:
            return
        from mq_bridge.endpoints.kit.drivers import require_driver
        from mq_bridge.endpoints.kit.listener import attach, server_ssl_context

        require_driver("aiohttp", endpoint="websocket", extra="websocket")
        if self._options.execution_mode == "direct_only":
            raise ConfigError(
                "every websocket route runs through the route pipeline here: use "
                "execution_mode auto or routed",
                path="websocket.execution_mode",
            )
        ssl_context = server_ssl_context(self._options.tls, self._options.url)
        listener = attach(
            self._host,
            self._port,
            ssl_context,
            HANDSHAKE_TIMEOUT,
            self._options.path,
            "GET",
            self._serve,
        )
        self._loop = listener.loop
        self._handoff = Handoff("websocket")
        self._handoff.listener = listener
        self._listener = listener

    @property
    def port(self) -> int:
        if self._listener is None:
            raise ClosedError("the websocket input is not connected")
        return self._listener.bound_port

    def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is None:
            return
        from mq_bridge.endpoints.kit.listener import detach

        handoff = self._handoff
        handoff.interrupt()
        handoff.queue.clear()
        listener.run(self._close_connections(), START_TIMEOUT)
        handoff.listener = None
        detach(listener, self._options.path, "GET", self._serve)

    async def _close_connections(self) -> None:
        from aiohttp import WSCloseCode

        await asyncio.gather(
            *(c.close(code=WSCloseCode.GOING_AWAY, message=b"the route stopped")
              for c in list(self._connections)),
            return_exceptions=True,
        )  # fmt: skip

    def describe(self) -> str:
        return f"websocket:{self._host}:{self._port}{self._options.path or ''}"

    def status(self) -> EndpointStatus:
        listener = self._listener
        return EndpointStatus(
            healthy=listener is not None,
            target=self.describe(),
            pending=len(self._handoff.queue),
            details={
                "connections": len(self._connections),
                "malformed_requests": 0 if listener is None else listener.bad_requests.count,
            },
        )

    # -- the route thread -------------------------------------------------------------

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        items = self._handoff.take(max_messages, timeout)
        return Batch([message for message, _ in items], [pending for _, pending in items])

    def ack(self, batch: Batch) -> None:
        settle = self._handoff.settle
        for pending in batch.token or ():
            if not pending.future.done():
                settle(pending, None)

    def nack(self, batch: Batch) -> None:
        self.ack(batch)

    def interrupt(self) -> None:
        self._handoff.interrupt()

    # -- the loop ---------------------------------------------------------------------

    def _refusal(self, request: web.BaseRequest) -> web.Response | None:
        """The handshake guards: max_connections (503), basic_auth (401)."""
        from aiohttp import web

        if self._max_connections and len(self._connections) >= self._max_connections:
            return web.Response(status=503, text="Too many connections")
        if self._expected_auth is not None:
            given = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
            if not hmac.compare_digest(hashlib.sha256(given).digest(), self._expected_auth):
                return web.Response(
                    status=401,
                    text="Unauthorized",
                    headers={"WWW-Authenticate": 'Basic realm="mq-bridge"'},
                )
        return None

    async def _serve(self, request: web.BaseRequest) -> web.StreamResponse:
        """Upgrade `request` and read its frames until the connection closes."""
        from aiohttp import WSMsgType, web

        refusal = self._refusal(request)
        if refusal is not None:
            return refusal
        socket = web.WebSocketResponse(
            max_msg_size=self._options.max_message_bytes or 0, compress=False, autoping=True
        )
        try:
            await socket.prepare(request)
        except web.HTTPBadRequest as error:  # not a WebSocket handshake: aiohttp answers 400
            self._note_malformed(request, f"handshake refused: {error.text}")
            raise
        assert self._loop is not None
        peer = request.transport.get_extra_info("peername") if request.transport else None
        shared = codec.connection_metadata(request.path, peer, request.headers.items())
        first_id = _id_from(request.headers.get(self._id_header))
        outstanding: deque[_Pending] = deque()
        writer = _Writer(socket)
        self._connections.add(socket)
        try:
            async for frame in socket:
                if frame.type is WSMsgType.TEXT or frame.type is WSMsgType.BINARY:
                    data = frame.data
                else:
                    if frame.type is WSMsgType.ERROR:  # a bad frame, or one too large (1009)
                        self._note_malformed(request, describe(frame.data))
                    break  # close, error
                if self._listener is None:
                    break
                correlation_id = f"{self._prefix}{next(self._counter)}"
                message = codec.message_from_frame(data, shared, correlation_id, first_id)
                first_id = None
                pending = _Pending(correlation_id, self._loop.create_future(), writer, self)
                self._replies.register(pending)
                self._handoff.put((message, pending))
                outstanding.append(pending)
                while outstanding and outstanding[0].future.done():
                    outstanding.popleft()
                if self._per_connection and len(outstanding) >= self._per_connection:
                    await outstanding[0].future
        finally:
            self._connections.discard(socket)
            for pending in outstanding:
                self._replies.forget(pending)
            writer.task.cancel()
        return socket

    def _note_malformed(self, request: web.BaseRequest, reason: str) -> None:
        if self._listener is not None:
            self._listener.bad_requests.note(request.remote, f"websocket: {reason}")


def _id_from(text: str | None) -> int | None:
    if not text or not text.strip():
        return None
    return normalize_message_id(text)


def _auth_digest(credentials: tuple[str, str] | None) -> bytes | None:
    if credentials is None:
        return None
    token = base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode("ascii")
    return hashlib.sha256(f"Basic {token}".encode()).digest()
