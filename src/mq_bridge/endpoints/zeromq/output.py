"""The `zeromq` output: a PUSH, PUB or REQ socket (see `mq_bridge.endpoints.zeromq`)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from mq_bridge.endpoints.base import BuildContext, EndpointStatus, OutputEndpoint
from mq_bridge.endpoints.zeromq.codec import (
    decode_envelopes,
    encode_envelopes,
    encode_framed,
    encode_message,
)
from mq_bridge.endpoints.zeromq.options import ZeroMqOptions
from mq_bridge.endpoints.zeromq.sockets import FrameIO, open_socket, zmq_module
from mq_bridge.errors import (
    ClosedError,
    ConfigError,
    EndpointError,
    EndpointUnavailableError,
    RequestTimeoutError,
)
from mq_bridge.message import Message

__all__ = ["ZeroMqOutput"]


class ZeroMqOutput(OutputEndpoint):
    """Sends on a PUSH, PUB or REQ socket; one send at a time (the socket is not thread-safe).

    What a returning `send` means: PUSH — libzmq queued the frames to a connected peer (the
    peer's process may still lose them: ZeroMQ has no acknowledgements); PUB — handed to
    the socket (no subscriber: dropped, as ZeroMQ does); REQ — the responder answered, so
    its route handled the batch.
    """

    def __init__(self, options: ZeroMqOptions, context: BuildContext) -> None:
        from mq_bridge.config.declarations import OptionError

        try:
            self._socket_type = options.socket_for("output")
        except OptionError as error:
            raise ConfigError(str(error), path="socket_type") from None
        self._options = options
        self._format = options.wire_format
        self._topic = (
            options.topic.encode("utf-8")
            if options.topic is not None and self._socket_type == "pub"
            else None
        )
        self._lock = threading.Lock()
        self._socket: Any = None
        self._closed = False

    def connect(self) -> None:
        with self._lock:
            if self._socket is None:
                self._zmq = zmq_module()
                self._io = FrameIO(self._zmq)
                self._socket = open_socket(self._options, self._socket_type)
                self._closed = False

    def send(self, messages: Sequence[Message]) -> None:
        if not messages:
            return
        if self._socket_type == "req":
            if self._format == "json":
                self._exchange([encode_envelopes(messages)], self._options.request_timeout)
            else:
                for message in messages:
                    self._exchange(encode_message(message, self._format), None)
            return
        with self._lock:
            socket = self._ready()
            if self._format == "json":
                self._put(socket, [encode_envelopes(messages)])
            elif self._format == "raw_framed" and self._topic is None:
                self._put_pairs(socket, encode_framed(messages))
            elif self._format == "raw_framed":
                for frames in encode_framed(messages):
                    self._put(socket, frames)
            else:
                for message in messages:
                    self._put(socket, [message.payload])

    def send_one(self, message: Message) -> None:
        if self._socket_type == "req" or self._format != "json":
            self.send((message,))
            return
        frame = encode_envelopes((message,))
        with self._lock:
            self._put(self._ready(), [frame])

    def request(self, message: Message, timeout: float | None) -> Message:
        """Send `message` as a request on a REQ socket and return the first reply."""
        if self._socket_type != "req":
            return super().request(message, timeout)
        frames = (
            [encode_envelopes((message,))]
            if self._format == "json"
            else encode_message(message, self._format)
        )
        replies = self._exchange(frames, timeout)
        if not replies:
            raise EndpointError(
                f"{self.describe()}: the responder acknowledged the request without a reply "
                "(its route has no `response` output, or the handler returned nothing)"
            )
        return replies[0]

    def _exchange(self, frames: list[bytes], timeout: float | None) -> list[Message]:
        """One request/reply round trip on the REQ socket; the reply's messages."""
        zmq = self._zmq
        wait = self._options.request_timeout if timeout is None else timeout
        with self._lock:
            socket = self._ready()
            self._put(socket, frames)
            if not socket.poll(int(wait * 1000), zmq.POLLIN):
                raise RequestTimeoutError(f"{self.describe()}: no reply within {wait:g} s")
            reply = socket.recv_multipart(copy=True)
        decoded = decode_envelopes(reply[-1]) if reply else None
        if decoded is None or decoded.problem is not None:
            problem = decoded.problem if decoded is not None else "an empty reply"
            raise EndpointError(f"{self.describe()}: the reply is not readable: {problem}")
        return decoded.messages

    def _put(self, socket: Any, frames: list[bytes]) -> None:
        if self._topic is not None:
            frames = [self._topic, *frames]
        try:
            self._io.send(socket, frames)
        except self._zmq.ZMQError as error:
            raise self._unavailable(error) from None

    def _put_pairs(self, socket: Any, pairs: list[list[bytes]]) -> None:
        """Send two-frame messages (no topic) in one loop: no call per message."""
        try:
            self._io.send_pairs(socket, pairs)
        except self._zmq.ZMQError as error:
            raise self._unavailable(error) from None

    def _unavailable(self, error: Exception) -> EndpointUnavailableError:
        if isinstance(error, self._zmq.Again):
            return EndpointUnavailableError(
                f"{self.describe()}: no peer took the message within "
                f"{self._options.request_timeout:g} s (none connected, or its queue is full)"
            )
        return EndpointUnavailableError(f"{self.describe()}: send failed: {error}")

    def _ready(self) -> Any:
        if self._socket is None:
            if self._closed:
                raise ClosedError(f"{self.describe()} is closed")
            raise EndpointError(f"{self.describe()}: connect() was not called")
        return self._socket

    def status(self) -> EndpointStatus:
        return EndpointStatus(healthy=self._socket is not None, target=self.describe())

    def describe(self) -> str:
        return self._options.describe("output")

    def close(self) -> None:
        with self._lock:
            socket, self._socket = self._socket, None
            self._closed = True
        if socket is not None:
            socket.close()
