"""The embedded ``mqbridge.Bridge`` server: one grpc.aio server per listening address.

Server-mode inputs on one address share its server, each serving one topic (as in
mq-bridge). The handlers are coroutines on the process's server loop (`loop`): grpcio's
sync server hands every streamed message from its poller thread to a handler thread and
back, where the aio server runs a stream's reads and writes on one thread::

    Publish        the message goes to its topic's input queue (and to the topic's
                   subscribers); the RPC answers once the route settled it: reply, ACK
                   or NACK (NACK too when no input serves the topic, or nobody settled
                   the message within `timeout_ms`)
    PublishBatch   the same per streamed message: one task reads and queues messages (at
                   most `BATCH_IN_FLIGHT` unanswered, as mq-bridge), the handler answers
                   them in request order, each once it is settled
    Subscribe      streams the topic's published messages to a remote subscriber; what
                   a `consumer_id` has not acknowledged is kept (1024 at most, 64
                   consumers) and sent again when it subscribes again
    Acknowledge    settles a subscriber's message (``mq_bridge.consumer_id`` metadata)
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import AsyncIterator
from typing import Any

from mq_bridge.endpoints.grpc import loop
from mq_bridge.endpoints.grpc.channel_options import channel_options, server_credentials
from mq_bridge.endpoints.grpc.codec import nack_response, topic_of
from mq_bridge.endpoints.grpc.options import GrpcOptions
from mq_bridge.endpoints.grpc.pending import Pending, TopicSink
from mq_bridge.endpoints.grpc.proto import ACK, SERVICE, messages
from mq_bridge.endpoints.grpc.streams import END, SubscriberStreams
from mq_bridge.errors import ConfigError, EndpointUnavailableError

__all__ = ["BridgeServer"]

log = logging.getLogger("mq_bridge.endpoints.grpc")

#: Messages of one PublishBatch stream read but not yet answered (mq-bridge's bound).
BATCH_IN_FLIGHT = 1024
#: How often (s) a publish waiting for room in a full input queue looks again.
FULL_WAIT = 0.005


class BridgeServer:
    """A grpc.aio server for `options`' address, serving the topics registered with it."""

    def __init__(self, options: GrpcOptions) -> None:
        self._options = options
        self._commit_timeout = (options.timeout_ms or 0) / 1000 or None
        self._lock = threading.Lock()
        self._sinks: dict[str, TopicSink] = {}
        self._subscribers: dict[str, SubscriberStreams] = {}
        self._loop = loop.server_loop()
        self._server: Any = None
        self.port = loop.run(self._start())

    async def _start(self) -> int:
        import grpc

        server = grpc.aio.server(options=channel_options(self._options, server=True))
        server.add_generic_rpc_handlers((self._handlers(grpc),))
        port = self._listen(server)
        await server.start()
        self._server = server
        return port

    def _listen(self, server: Any) -> int:
        """Add the listening port; `EndpointUnavailableError` when it cannot be had."""
        options = self._options
        cause: Exception | None = None
        try:
            if options.uses_tls:
                port = server.add_secure_port(options.target, server_credentials(options))
            else:
                port = server.add_insecure_port(options.target)
        except RuntimeError as error:  # grpcio >= 1.6x raises where older ones returned 0
            port, cause = 0, error
        if not port:
            reason = f": {cause}" if cause else " (address in use, or not a local address)"
            raise EndpointUnavailableError(f"grpc: cannot listen on {options.target}{reason}")
        return int(port)

    def _handlers(self, grpc: Any) -> Any:
        # Requests arrive as bytes and are parsed by the handlers: a malformed one is then
        # answered INTERNAL (as grpcio's sync server and tonic do), not UNKNOWN.
        response = messages().PublishResponse.SerializeToString
        return grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "Publish": grpc.unary_unary_rpc_method_handler(
                    self._publish, response_serializer=response
                ),
                "PublishBatch": grpc.stream_stream_rpc_method_handler(
                    self._publish_batch, response_serializer=response
                ),
                "Subscribe": grpc.unary_stream_rpc_method_handler(
                    self._subscribe, response_serializer=messages().BridgeMessage.SerializeToString
                ),
                "Acknowledge": grpc.unary_unary_rpc_method_handler(
                    self._acknowledge, response_serializer=messages().AckResponse.SerializeToString
                ),
            },
        )

    # ---- registration -------------------------------------------------------------

    def register(self, topic: str, sink: TopicSink) -> None:
        with self._lock:
            if topic in self._sinks:
                raise ConfigError(
                    f"another grpc server-mode input already serves topic {topic!r} on "
                    f"{self._options.target}",
                    path="topic",
                )
            self._sinks[topic] = sink
            self._subscribers.setdefault(topic, SubscriberStreams(self._loop))

    def unregister(self, topic: str, sink: TopicSink) -> None:
        with self._lock:
            if self._sinks.get(topic) is sink:
                del self._sinks[topic]
                subscribers = self._subscribers.pop(topic, None)
            else:
                subscribers = None
        if subscribers is not None:
            subscribers.close()

    def stop(self) -> None:
        with self._lock:
            subscribers = list(self._subscribers.values())
            self._subscribers.clear()
        for group in subscribers:
            group.close()
        if self._server is not None:
            loop.run(self._server.stop(grace=1.0), timeout=5)

    # ---- handlers (on the server loop) --------------------------------------------

    @staticmethod
    async def _parse(kind: Any, raw: bytes, context: Any) -> Any:
        """`raw` as a `kind` message; a malformed one aborts the call INTERNAL."""
        import grpc
        from google.protobuf.message import DecodeError

        try:
            return kind.FromString(raw)
        except DecodeError as error:
            name = kind.DESCRIPTOR.full_name
            await context.abort(grpc.StatusCode.INTERNAL, f"cannot parse a {name}: {error}")

    async def _dispatch(self, bridge: Any) -> Pending | Any:
        """Queue `bridge` for its topic's input: its `Pending`, or a NACK answer."""
        if not bridge.id:
            bridge.id = str(uuid.UUID(int=uuid.uuid4().int))
        topic = topic_of(bridge)
        with self._lock:
            sink = self._sinks.get(topic)
            subscribers = self._subscribers.get(topic)
        if sink is None:
            return nack_response(bridge.id, f"No route for topic '{topic}'")
        if subscribers is not None and subscribers.streams:
            subscribers.publish(bridge)
        while sink.full():  # only this loop adds to the queue: room stays room
            await asyncio.sleep(FULL_WAIT)
        pending = Pending(bridge, self._loop)
        if not sink.offer(pending):
            return nack_response(bridge.id, "Internal queue closed")
        return pending

    async def _publish(self, raw: bytes, context: Any) -> Any:
        request = await self._parse(messages().BridgeMessage, raw, context)
        outcome = await self._dispatch(request)
        if not isinstance(outcome, Pending):
            return outcome
        return await outcome.answer(self._commit_timeout)

    async def _publish_batch(
        self, requests: AsyncIterator[bytes], context: Any
    ) -> AsyncIterator[Any]:
        outcomes: asyncio.Queue[Any] = asyncio.Queue(maxsize=BATCH_IN_FLIGHT)
        reader = asyncio.ensure_future(self._read_batch(requests, outcomes))
        try:
            while (outcome := await outcomes.get()) is not END:
                if isinstance(outcome, Pending):
                    outcome = await outcome.answer(self._commit_timeout)
                elif isinstance(outcome, bytes):  # a malformed request: the reader stopped
                    await self._parse(messages().BridgeMessage, outcome, context)
                yield outcome
        finally:
            reader.cancel()

    async def _read_batch(
        self, requests: AsyncIterator[bytes], outcomes: asyncio.Queue[Any]
    ) -> None:
        """Dispatch a PublishBatch stream's messages while earlier ones are answered; a
        malformed one is queued as it came (bytes), and ends the reading."""
        from google.protobuf.message import DecodeError

        parse = messages().BridgeMessage.FromString
        try:
            async for raw in requests:
                try:
                    request = parse(raw)
                except DecodeError:
                    await outcomes.put(raw)
                    break
                await outcomes.put(await self._dispatch(request))
        except Exception as error:  # the client went away
            log.debug("grpc PublishBatch: request stream ended: %s", error)
        await outcomes.put(END)

    async def _subscribe(self, raw: bytes, context: Any) -> AsyncIterator[Any]:
        import grpc

        request = await self._parse(messages().SubscribeRequest, raw, context)
        topic = request.topic.strip() or "default"
        ephemeral = not request.consumer_id
        consumer_id = request.consumer_id or str(uuid.uuid4())
        with self._lock:
            subscribers = self._subscribers.get(topic)
        if subscribers is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"No active gRPC topic '{topic}'")
            return
        attached = subscribers.attach(consumer_id)
        if attached is None:
            await context.abort(
                grpc.StatusCode.ALREADY_EXISTS,
                f"gRPC consumer_id '{consumer_id}' already has an active subscription on "
                f"topic '{topic}'",
            )
            return
        stream, replay = attached
        # A cancelled or broken stream cancels this handler, whose `finally` frees the
        # consumer id at once, so the subscriber may come back under the same id.
        try:
            await context.send_initial_metadata(())  # the subscriber knows it was accepted
            seen = {bridge.id for bridge in replay}
            for bridge in replay:
                yield bridge
            while (bridge := await stream.get()) is not END:
                if bridge.id not in seen:
                    yield bridge
        finally:
            subscribers.detach(consumer_id, stream, ephemeral)

    async def _acknowledge(self, raw: bytes, context: Any) -> Any:
        proto = messages()
        request = await self._parse(proto.Ack, raw, context)
        consumer_id = request.metadata.get("mq_bridge.consumer_id")
        if not consumer_id:
            return proto.AckResponse(
                success=False, error="Ack is missing the mq_bridge.consumer_id metadata entry"
            )
        with self._lock:
            groups = list(self._subscribers.values())
        found = any(
            group.acknowledge(consumer_id, request.id, request.status == ACK) for group in groups
        )
        return proto.AckResponse(
            success=found, error="" if found else "Unknown consumer or message"
        )
