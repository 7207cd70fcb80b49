"""The websocket output: one client connection to `url`.

`send` returns once each frame was handed to the connection (WebSocket has no
acknowledgement; a lost connection fails the send with `EndpointUnavailableError`,
retriable, and the runtime reconnects). `request` sends one frame and returns the next
frame the server sends on that connection, with the request's id (requests on one output
are serialized: the reply of a request is the frame that follows it).

The connection is made by `connect` (a refused one fails there), on the process's asyncio
loop thread, with `basic_auth` as an ``Authorization`` header and TLS for ``wss://``.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mq_bridge.endpoints.base import BuildContext, OutputEndpoint
from mq_bridge.endpoints.kit.event_loop import loop_thread
from mq_bridge.endpoints.kit.tls import ssl_context
from mq_bridge.endpoints.websocket import codec
from mq_bridge.endpoints.websocket.options import WebSocketOptions
from mq_bridge.errors import ClosedError, EndpointUnavailableError, RequestTimeoutError
from mq_bridge.message import Message

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection

__all__ = ["WebSocketOutput"]

CONNECT_TIMEOUT = 10.0


class WebSocketOutput(OutputEndpoint):
    """Frames to the server at `url` (see the module docstring)."""

    def __init__(self, options: WebSocketOptions, context: BuildContext) -> None:
        self._options = options
        url = options.url.strip()
        self._url = url if "://" in url else f"ws://{url}"
        self._timeout = options.request_timeout
        self._connection: ClientConnection | None = None
        self._lock: asyncio.Lock | None = None

    def connect(self) -> None:
        if self._connection is not None:
            return
        from mq_bridge.endpoints.kit.drivers import require_driver

        require_driver("websockets", endpoint="websocket", extra="websocket")
        context = ssl_context(self._options.tls, self._url, path="websocket.tls")
        self._connection = loop_thread().run(self._open(context), CONNECT_TIMEOUT + 1)

    async def _open(self, context: object) -> ClientConnection:
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidHandshake

        headers = {}
        if self._options.basic_auth is not None:
            user, password = self._options.basic_auth
            token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            headers["Authorization"] = f"Basic {token}"
        self._lock = asyncio.Lock()
        try:
            return await connect(
                self._url,
                additional_headers=headers,
                ssl=context if self._url.startswith("wss") else None,
                open_timeout=CONNECT_TIMEOUT,
                max_size=self._options.max_message_bytes,
                compression=None,
            )
        except (OSError, InvalidHandshake, TimeoutError, asyncio.TimeoutError) as error:
            raise EndpointUnavailableError(
                f"websocket: cannot connect to {self.describe()}: {error}"
            ) from None

    def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                loop_thread().run(connection.close(), CONNECT_TIMEOUT)
            except (TimeoutError, ClosedError):
                pass

    def describe(self) -> str:
        return f"websocket:{self._url.split('@')[-1].split('?')[0]}"

    def send(self, messages: Sequence[Message]) -> None:
        frames = [codec.frame_data(message) for message in messages]
        loop_thread().run(self._send(frames), self._timeout)

    def send_one(self, message: Message) -> None:
        loop_thread().run(self._send([codec.frame_data(message)]), self._timeout)

    def request(self, message: Message, timeout: float | None) -> Message:
        limit = timeout if timeout is not None else self._timeout
        try:
            return loop_thread().run(self._request(message), limit)
        except TimeoutError:
            raise RequestTimeoutError(
                f"websocket: no reply from {self.describe()} within {limit} s"
            ) from None

    async def _send(self, frames: list[str | bytes]) -> None:
        from websockets.exceptions import ConnectionClosed

        connection = self._open_connection()
        try:
            for frame in frames:
                await connection.send(frame)
        except ConnectionClosed as error:
            raise EndpointUnavailableError(f"websocket: {self.describe()}: {error}") from None

    async def _request(self, message: Message) -> Message:
        from websockets.exceptions import ConnectionClosed

        connection = self._open_connection()
        assert self._lock is not None
        async with self._lock:
            try:
                await connection.send(codec.frame_data(message))
                data = await connection.recv()
            except ConnectionClosed as error:
                raise EndpointUnavailableError(f"websocket: {self.describe()}: {error}") from None
        return codec.reply_from_frame(data, message)

    def _open_connection(self) -> ClientConnection:
        if self._connection is None:
            raise ClosedError("the websocket output is closed (or not connected yet)")
        return self._connection
