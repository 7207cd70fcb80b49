"""The `redis_streams` output: XADD, one pipelined round trip per batch.

The XADDs are written as finished RESP bytes by `codec.XaddEncoder` and sent on a
connection the output holds (`commands.CommandChannel`): per message, one ``%`` format;
per batch, one write and one read of the replies.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mq_bridge.endpoints.base import BuildContext, EndpointStatus, JsonSender, OutputEndpoint
from mq_bridge.endpoints.redis.client import acquire_client, is_unavailable, raise_translated
from mq_bridge.endpoints.redis.codec import XaddEncoder
from mq_bridge.endpoints.redis.commands import CommandChannel
from mq_bridge.endpoints.redis.options import RedisStreamsOptions
from mq_bridge.errors import (
    ClosedError,
    EndpointError,
    EndpointUnavailableError,
    RequestTimeoutError,
    SendError,
)
from mq_bridge.message import (
    Message,
    json_send_parts,
)

if TYPE_CHECKING:
    from redis import Redis

    from mq_bridge.endpoints.kit.connections import Lease

__all__ = ["RedisStreamsOutput"]

ENDPOINT = "redis_streams"
#: Messages per write: Redis runs the first XADDs while the next are encoded.
_CHUNK = 128
_ALL_ENTRY_IDS = {bytes}  # the types of the replies when every XADD succeeded


class RedisStreamsOutput(OutputEndpoint):
    """XADDs each message as mq-bridge 1.2.0 does (see `codec`).

    `send` returns once Redis has answered every XADD of the batch with its entry id (the
    batch goes out in one write on the output's own connection: one round trip). A failed
    XADD fails only its message (`SendError`); a lost connection fails the batch as
    `EndpointUnavailableError`, and a retry may then add some entries twice (at least once).
    """

    def __init__(self, options: RedisStreamsOptions, context: BuildContext) -> None:
        self._options = options
        self._context = context
        self.stream = options.stream_name(context.route_name)
        self._where = options.describe(context.route_name)
        self._encoder = XaddEncoder(self.stream, _trim_arguments(options))
        self._lease: Lease[Redis] | None = None
        self._channel: CommandChannel | None = None
        self._closed = False

    def connect(self) -> None:
        self._closed = False
        if self._lease is None:
            lease = acquire_client(self._options, ENDPOINT, self._context.connections)
            self._channel = CommandChannel(lease.connection)
            self._lease = lease

    def _commands(self) -> CommandChannel:
        channel = self._channel
        if channel is None or self._closed:
            if self._closed:
                raise ClosedError(f"{self._where} output is closed")
            self.connect()  # a reconnect failed earlier: try again (retriable)
            channel = self._channel
            assert channel is not None
        return channel

    def send(self, messages: Sequence[Message]) -> None:
        channel = self._commands()
        chunks = self._encoder.chunks(messages, _CHUNK)
        try:
            replies = channel.call(chunks, len(messages))
        except Exception as error:
            raise_translated(error, self._where, ENDPOINT)
        if set(map(type, replies)) != _ALL_ENTRY_IDS:  # (the common case, checked in C)
            failures = {i: _as_error(r) for i, r in enumerate(replies) if isinstance(r, Exception)}
            if failures:
                raise SendError(failures)

    def send_one(self, message: Message) -> None:
        payload, metadata, id_value = message.payload, message.metadata_view, message.id_int
        self._xadd(self._encoder.encode_one(payload, metadata, id_value))

    def _xadd(self, command: bytes) -> None:
        channel = self._commands()
        try:
            (reply,) = channel.call(command, 1)
        except Exception as error:
            raise_translated(error, self._where, ENDPOINT)
        if isinstance(reply, Exception):
            raise _as_error(reply)

    def json_sender(self) -> JsonSender | None:
        """`send_json` without building a `Message`: the same checks, the same entry."""
        encode_one = self._encoder.encode_one

        def send_json(data: Any, metadata: Mapping[str, str] | None, id: str | int | None) -> None:
            self._xadd(encode_one(*json_send_parts(data, metadata, id)))

        return send_json

    def request(self, message: Message, timeout: float | None) -> Message:
        """XADD the message and wait for the reply a route in this process sends back
        through a `response` output (matched by ``correlation_id``; default: the id)."""
        correlation_id = message.get("correlation_id")
        if correlation_id is None:
            correlation_id = message.assigned_id()
            message = message.with_metadata(correlation_id=correlation_id)
        started = time.monotonic()
        with self._context.replies.expect(correlation_id) as waiter:
            self.send_one(message)
            left = None if timeout is None else max(0.0, timeout - (time.monotonic() - started))
            reply = waiter.wait(left)
        if reply is None:
            raise RequestTimeoutError(
                f"no reply for {correlation_id} on {self.describe()} within {timeout}s; does a "
                "route in this process read the stream and answer through a `response` output?"
            )
        return reply

    def status(self) -> EndpointStatus:
        healthy = self._lease is not None
        error = None if healthy else ("closed" if self._closed else "not connected")
        return EndpointStatus(healthy=healthy, target=self.describe(), error=error)

    def describe(self) -> str:
        return self._where

    def close(self) -> None:
        self._closed = True
        lease, self._lease = self._lease, None
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()
        if lease is not None:
            lease.release()


def _trim_arguments(options: RedisStreamsOptions) -> tuple[str | int, ...]:
    if options.maxlen is None:
        return ()
    if options.approx_trim is False:
        return ("MAXLEN", options.maxlen)
    return ("MAXLEN", "~", options.maxlen)


def _as_error(result: Exception) -> Exception:
    """A pipeline's per-command error as the bridge's (a server error is not retriable)."""
    if is_unavailable(result):
        return EndpointUnavailableError(str(result))
    return EndpointError(f"XADD failed: {result}")
