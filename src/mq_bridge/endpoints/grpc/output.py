"""The `grpc` output: a client of a ``mqbridge.Bridge`` server (ours or mq-bridge's).

A `send` returns once the server answered every message: ``Ack{ACK}`` or a ``reply`` (its
route handled the message). ``Ack{NACK}`` and ``error`` answers fail that message
(retriable: the server's route did not take it), as does an RPC that fails or outlives
`request_timeout_ms`; `SendError` names the failed messages of a batch. One message goes
as a unary ``Publish``; a batch as one ``PublishBatch`` stream (all messages written,
answers read in order), serialized up front and driven on the caller's thread
(`batch_call`: grpcio's public stream call costs three thread hand-overs per message).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mq_bridge.endpoints.base import BuildContext, EndpointStatus, OutputEndpoint
from mq_bridge.endpoints.grpc import batch_call
from mq_bridge.endpoints.grpc.channel_options import channel_options, client_credentials
from mq_bridge.endpoints.grpc.codec import from_bridge, to_bridge
from mq_bridge.endpoints.grpc.options import GrpcOptions
from mq_bridge.endpoints.grpc.proto import NACK, messages, method_path
from mq_bridge.endpoints.kit.connections import Lease, connection_key
from mq_bridge.endpoints.kit.drivers import require_driver
from mq_bridge.errors import (
    ClosedError,
    EndpointError,
    EndpointUnavailableError,
    RequestTimeoutError,
    SendError,
)
from mq_bridge.message import Message

__all__ = ["GrpcOutput", "open_channel", "rpc_error", "status_error"]

_PUBLISH_BATCH = method_path("PublishBatch").encode()


class NackedError(EndpointError):
    """The server answered NACK (its route did not take the message): send it again later."""

    retriable = True


def open_channel(options: GrpcOptions) -> Any:
    """A grpcio channel to the server, ready within `connect_timeout` or
    `EndpointUnavailableError`."""
    grpc = require_driver("grpc", endpoint="grpc", extra="grpc", package="grpcio")
    settings = channel_options(options, server=False)
    if options.uses_tls:
        channel = grpc.secure_channel(options.target, client_credentials(options), settings)
    else:
        channel = grpc.insecure_channel(options.target, settings)
    try:
        grpc.channel_ready_future(channel).result(timeout=options.connect_timeout)
    except grpc.FutureTimeoutError:
        channel.close()
        raise EndpointUnavailableError(
            f"grpc: no server reachable at {options.target} within {options.connect_timeout:g} s"
        ) from None
    return channel


def rpc_error(error: Any, what: str) -> EndpointError:
    """Our error for a grpcio `RpcError`: unavailable, deadline -> retriable."""
    code = error.code() if hasattr(error, "code") else None
    return status_error(code, error.details() if code else str(error), what)


def status_error(code: Any, details: str, what: str) -> EndpointError:
    """Our error for a call that ended with the `grpc.StatusCode` `code` (None: unknown)."""
    import grpc

    text = f"{what}: {code.name if code else 'error'}: {details}"
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
        return EndpointUnavailableError(text)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return RequestTimeoutError(text)
    return EndpointError(text)


class GrpcOutput(OutputEndpoint):
    """Publishes to a Bridge server's topic; `request` returns the server route's reply."""

    def __init__(self, options: GrpcOptions, context: BuildContext) -> None:
        self._options = options
        self._context = context
        self._topic = options.topic_name
        self._lease: Lease[Any] | None = None
        self._closed = False

    def connect(self) -> None:
        if self._lease is not None:
            return
        options = self._options
        key = connection_key(
            "grpc",
            target=options.target,
            tls=options.tls,
            uses_tls=options.uses_tls,
            settings=channel_options(options, server=False),
        )
        self._lease = self._context.connections.acquire(
            key,
            lambda: open_channel(options),
            lambda channel: channel.close(),
            shared=bool(options.shared),
        )
        proto = messages()
        channel = self._lease.connection
        self._publish = channel.unary_unary(
            method_path("Publish"),
            request_serializer=proto.BridgeMessage.SerializeToString,
            response_deserializer=proto.PublishResponse.FromString,
        )
        self._publish_batch = channel.stream_stream(_PUBLISH_BATCH.decode())  # bytes both ways
        self._channel = channel
        self._single_threaded = batch_call.supported(channel)
        self._closed = False

    def _check(self) -> None:
        if self._lease is None:
            if self._closed:
                raise ClosedError(f"{self.describe()} is closed")
            raise EndpointError(f"{self.describe()}: connect() was not called")

    def send_one(self, message: Message) -> None:
        self._check()
        response = self._call(to_bridge(message, self._topic), self._options.request_timeout)
        problem = _problem(response)
        if problem is not None:
            raise problem

    def send(self, messages_: Sequence[Message]) -> None:
        if len(messages_) <= 1:
            for message in messages_:
                self.send_one(message)
            return
        self._check()
        topic = self._topic
        requests = [to_bridge(message, topic).SerializeToString() for message in messages_]
        answers, batch_error = self._stream(requests)
        failures: dict[int, BaseException] = {}
        for index in range(len(requests)):
            if index < len(answers):
                problem = _answer_problem(answers[index])
                if problem is not None:
                    failures[index] = problem
            else:
                failures[index] = batch_error or EndpointUnavailableError(
                    f"{self.describe()}: the server answered {len(answers)} of "
                    f"{len(requests)} messages"
                )
        if len(failures) == len(requests) and batch_error is not None:
            raise batch_error
        if failures:
            raise SendError(failures)

    def _stream(self, requests: list[bytes]) -> tuple[list[bytes], EndpointError | None]:
        """One ``PublishBatch`` call: the serialized answers, and the call's error if it
        did not end OK."""
        timeout = self._options.request_timeout
        if self._single_threaded:
            try:
                outcome = batch_call.publish_batch(self._channel, _PUBLISH_BATCH, requests, timeout)
            except (TypeError, AttributeError):
                # grpcio's private call changed shape (it fails before the first message is
                # sent): use the public call from now on
                self._single_threaded = False
            else:
                if outcome.code is not None and outcome.code.name == "OK":
                    return outcome.answers, None
                error = status_error(outcome.code, outcome.details, self.describe())
                return outcome.answers, error
        try:
            return list(self._publish_batch(iter(requests), timeout=timeout)), None
        except Exception as error:
            if not _is_rpc_error(error):
                raise
            return [], rpc_error(error, self.describe())

    def request(self, message: Message, timeout: float | None) -> Message:
        """Publish `message` and return the server route's reply."""
        self._check()
        wait = self._options.request_timeout if timeout is None else timeout
        response = self._call(to_bridge(message, self._topic), wait)
        problem = _problem(response)
        if problem is not None:
            raise problem
        if response.WhichOneof("result") != "reply":
            raise EndpointError(
                f"{self.describe()}: the server acknowledged the message without a reply "
                "(its route has no `response` output)"
            )
        return from_bridge(response.reply)

    def _call(self, bridge: Any, timeout: float) -> Any:
        try:
            return self._publish(bridge, timeout=timeout)
        except Exception as error:
            if _is_rpc_error(error):
                raise rpc_error(error, self.describe()) from None
            raise

    def status(self) -> EndpointStatus:
        return EndpointStatus(healthy=self._lease is not None, target=self.describe())

    def describe(self) -> str:
        return self._options.describe()

    def close(self) -> None:
        lease, self._lease = self._lease, None
        self._closed = True
        if lease is not None:
            lease.release()


def _is_rpc_error(error: BaseException) -> bool:
    import grpc

    return isinstance(error, grpc.RpcError)


def _answer_problem(answer: bytes) -> EndpointError | None:
    """`_problem` of a serialized ``PublishResponse``; one that does not parse fails too."""
    from google.protobuf.message import DecodeError

    try:
        response = messages().PublishResponse.FromString(answer)
    except DecodeError as error:
        return EndpointError(f"the server's answer is not a PublishResponse: {error}")
    return _problem(response)


def _problem(response: Any) -> EndpointError | None:
    """None when `response` says the message was taken (ACK or a reply), else the error."""
    kind = response.WhichOneof("result")
    if kind == "reply":
        return None
    if kind == "ack":
        if response.ack.status != NACK:
            return None
        return NackedError(f"the server answered NACK: {response.ack.reason or 'no reason'}")
    if kind == "error":
        return EndpointError(f"the server answered an error: {response.error}")
    return EndpointError("the server's answer is empty")
