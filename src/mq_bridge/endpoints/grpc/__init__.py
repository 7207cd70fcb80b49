"""grpc: mq-bridge's gRPC service ``mqbridge.Bridge``, as an embedded server or a client.

Features
    - Input, `server_mode: true`: a gRPC server (grpcio) on `url` serving mq-bridge's
      ``mqbridge.Bridge`` service. ``Publish`` / ``PublishBatch`` hand each message to the
      input whose `topic` matches the message's ``mq_bridge.topic`` metadata ("default"
      when unset) and answer once the route settled it: ``reply`` (what the route's
      `response` output sent), ``ack`` ACK, or ``ack`` NACK (nacked, or not settled within
      `timeout_ms`). ``Subscribe`` streams the published messages of a topic to remote
      subscribers (mq-bridge's client input), ``Acknowledge`` settles them.
    - Input, client (`server_mode: false`): ``Subscribe`` to a remote Bridge server's topic
      with `consumer_id`; each commit sends ``Acknowledge``.
    - Output (client): ``Publish`` per message (``PublishBatch`` for a batch), a send returns
      once the server answered ACK (NACK or an error fails the message: `SendError`);
      `request()` returns the server's ``reply``. Channels are shared per settings
      (`shared`).
    - Wire: ``BridgeMessage{payload, id, metadata}``; the id as a UUID string, the topic in
      ``mq_bridge.topic``. The message classes are built at run time from a re-declared
      descriptor of mq-bridge's ``mqbridge/bridge.proto`` (`proto.py`): no generated code.
    - Limits: `max_decoding_message_size` (4 MiB) both ways; keepalive, window and
      concurrency settings as HTTP/2 channel options; `tls` on either side.

URL
    host:port (server), http://host:port or https://host:port (client)

Options (declared in `options.py`, `GrpcOptions`; mq-bridge's names)
    url, topic, server_mode, tls, timeout_ms, connect_timeout_ms, request_timeout_ms,
    consumer_id, idle_stream_timeout_ms, initial_stream_window_size,
    initial_connection_window_size, concurrency_limit_per_connection,
    http2_keepalive_interval_ms, http2_keepalive_timeout_ms, max_decoding_message_size,
    max_encoding_message_size, shared; the dynamic-call options are rejected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mq_bridge.endpoints.base import BuildContext
from mq_bridge.endpoints.grpc.options import GrpcOptions

if TYPE_CHECKING:
    from mq_bridge.endpoints.base import InputEndpoint
    from mq_bridge.endpoints.grpc.output import GrpcOutput

__all__ = ["OPTIONS", "build_input", "build_output"]

OPTIONS = GrpcOptions


def build_input(options: GrpcOptions, context: BuildContext) -> InputEndpoint:
    """The embedded server (`server_mode`), or a Subscribe client."""
    if options.server_mode:
        from mq_bridge.endpoints.grpc.server import GrpcServerInput

        return GrpcServerInput(options, context)
    from mq_bridge.endpoints.grpc.subscriber import GrpcSubscriberInput

    return GrpcSubscriberInput(options, context)


def build_output(options: GrpcOptions, context: BuildContext) -> GrpcOutput:
    """A client publishing to a Bridge server."""
    from mq_bridge.endpoints.grpc.output import GrpcOutput

    return GrpcOutput(options, context)
