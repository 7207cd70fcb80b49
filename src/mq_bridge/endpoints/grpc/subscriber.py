"""The `grpc` input as a client: ``Subscribe`` to a remote Bridge server's topic.

A reader thread keeps the server-streaming call open and queues what arrives (a stream
that breaks is opened again, 1 s apart); `receive` hands the queue out. `ack` sends one
``Acknowledge{ACK}`` per message with the ``mq_bridge.consumer_id`` metadata, `nack` an
``Acknowledge{NACK}``: the server keeps unacknowledged messages of a stable `consumer_id`
and sends them again when it subscribes again (mq-bridge's server does; nothing is
redelivered within a stream).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from typing import Any

from mq_bridge.endpoints.base import Batch, BuildContext, EndpointStatus, InputEndpoint
from mq_bridge.endpoints.grpc.codec import from_bridge
from mq_bridge.endpoints.grpc.options import GrpcOptions
from mq_bridge.endpoints.grpc.output import open_channel
from mq_bridge.endpoints.grpc.proto import ACK, NACK, messages, method_path
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.errors import ClosedError, EndpointError, EndpointUnavailableError

__all__ = ["GrpcSubscriberInput"]

log = logging.getLogger("mq_bridge.endpoints.grpc")

#: Messages read ahead of `receive` before the reader thread waits.
READ_AHEAD = 4096


class _StillSubscribed(EndpointUnavailableError):
    """The server still has a live stream for our consumer id."""


class GrpcSubscriberInput(InputEndpoint):
    """Reads a remote server's topic through ``Subscribe``."""

    acks_in_any_order = True

    def __init__(self, options: GrpcOptions, context: BuildContext) -> None:
        self._options = options
        self._context = context
        self._consumer_id = options.consumer_id or str(uuid.uuid4())
        self._queue: deque[Any] = deque()
        self._ready = threading.Condition()
        self._wakeup = Wakeup(self._ready)
        self._channel: Any = None
        self._call: Any = None
        self._reader: threading.Thread | None = None
        self._stopping = threading.Event()
        self._closed = False
        self._error: str | None = None

    def connect(self) -> None:
        if self._channel is not None:
            return
        proto = messages()
        channel = open_channel(self._options)
        self._subscribe = channel.unary_stream(
            method_path("Subscribe"),
            request_serializer=proto.SubscribeRequest.SerializeToString,
            response_deserializer=proto.BridgeMessage.FromString,
        )
        self._acknowledge = channel.unary_unary(
            method_path("Acknowledge"),
            request_serializer=proto.Ack.SerializeToString,
            response_deserializer=proto.AckResponse.FromString,
        )
        self._channel = channel
        self._stopping.clear()
        deadline = time.monotonic() + self._options.connect_timeout
        while True:
            try:
                call = self._open_stream()
                break
            except _StillSubscribed:
                # Our previous stream under this consumer id (before a close) is still
                # being torn down by the server: a moment later the id is free.
                if time.monotonic() >= deadline:
                    channel.close()
                    self._channel = None
                    raise
                time.sleep(0.05)
        self._closed = False
        self._reader = threading.Thread(
            target=self._read, args=(call,), name="mq-bridge-grpc-subscriber", daemon=True
        )
        self._reader.start()

    def _open_stream(self) -> Any:
        """A Subscribe call whose server accepted it (its first answer awaited)."""
        import grpc

        proto = messages()
        request = proto.SubscribeRequest(
            topic=self._options.topic_name, consumer_id=self._consumer_id
        )
        call = self._subscribe(request)
        self._call = call
        try:
            # The server sends headers when it accepts; a refusal comes as an error.
            call.initial_metadata()
        except grpc.RpcError as error:
            kind = (
                _StillSubscribed
                if error.code() == grpc.StatusCode.ALREADY_EXISTS
                else EndpointUnavailableError
            )
            raise kind(
                f"{self.describe()}: Subscribe failed: {error.code().name}: {error.details()}"
            ) from None
        if call.done() and call.code() != grpc.StatusCode.OK:  # refused: trailers only
            kind = (
                _StillSubscribed
                if call.code() == grpc.StatusCode.ALREADY_EXISTS
                else EndpointUnavailableError
            )
            raise kind(f"{self.describe()}: Subscribe failed: {call.code().name}: {call.details()}")
        return call

    def _read(self, call: Any) -> None:
        import grpc

        while not self._stopping.is_set():
            try:
                for bridge in call:
                    with self._ready:
                        while len(self._queue) >= READ_AHEAD and not self._stopping.is_set():
                            self._ready.wait(0.5)
                        self._queue.append(bridge)
                        self._ready.notify_all()
                self._error = "the server ended the Subscribe stream"
            except grpc.RpcError as error:
                if self._stopping.is_set():
                    return
                self._error = f"{error.code().name}: {error.details()}"
            log.warning("%s: %s; subscribing again", self.describe(), self._error)
            while not self._stopping.wait(1.0):
                try:
                    call = self._open_stream()
                    self._error = None
                    break
                except EndpointUnavailableError as error:
                    self._error = str(error)

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._ready:
            queue = self._queue
            self._wakeup.wait_until(
                lambda: queue or self._closed or self._channel is None, deadline
            )
            if not queue:
                if self._closed:
                    raise ClosedError(f"{self.describe()} is closed")
                if self._channel is None:
                    raise EndpointError(f"{self.describe()}: connect() was not called")
                return Batch([])
            taken = [self._queue.popleft() for _ in range(min(max_messages, len(self._queue)))]
            self._ready.notify_all()
        return Batch([from_bridge(bridge) for bridge in taken], [b.id for b in taken])

    def ack(self, batch: Batch) -> None:
        self._settle(batch, ACK)

    def nack(self, batch: Batch) -> None:
        self._settle(batch, NACK)

    def _settle(self, batch: Batch, status: int) -> None:
        import grpc

        proto = messages()
        metadata = {"mq_bridge.consumer_id": self._consumer_id}
        futures = [
            self._acknowledge.future(
                proto.Ack(id=message_id, status=status, metadata=metadata),
                timeout=self._options.request_timeout,
            )
            for message_id in batch.token or ()
        ]
        for future in futures:
            try:
                answer = future.result()
            except grpc.RpcError as error:
                log.warning("%s: Acknowledge failed: %s", self.describe(), error.code().name)
                continue
            if not answer.success:
                log.warning("%s: Acknowledge rejected: %s", self.describe(), answer.error)

    def interrupt(self) -> None:
        self._wakeup.interrupt()

    def status(self) -> EndpointStatus:
        return EndpointStatus(
            healthy=self._channel is not None and self._error is None,
            target=self.describe(),
            error=self._error,
            details={"mode": "client", "consumer_id": self._consumer_id, "read": len(self._queue)},
        )

    def describe(self) -> str:
        return self._options.describe()

    def close(self) -> None:
        self._stopping.set()
        call, self._call = self._call, None
        if call is not None:
            call.cancel()
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.join(5)
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()
        with self._ready:
            self._queue.clear()
            self._closed = True
            self._ready.notify_all()
