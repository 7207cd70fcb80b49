"""The embedded ``mqbridge.Bridge`` server: one grpcio server per listening address.

Server-mode inputs on one address share its server, each serving one topic (as in
mq-bridge). The handlers run on grpcio's thread pool:

    Publish        the message goes to its topic's input queue (and to the topic's
                   subscribers); the RPC answers once the route settled it: reply, ACK
                   or NACK (NACK too when no input serves the topic, or nobody settled
                   the message within `timeout_ms`)
    PublishBatch   the same per streamed message; answers stream back in request order,
                   while later messages are already being handed out
    Subscribe      streams the topic's published messages to a remote subscriber; what
                   a `consumer_id` has not acknowledged is kept (1024 at most, 64
                   consumers) and sent again when it subscribes again
    Acknowledge    settles a subscriber's message (``mq_bridge.consumer_id`` metadata)
"""

from __future__ import annotations

import logging
import queue
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from mq_bridge.endpoints.grpc.channel_options import channel_options, server_credentials
from mq_bridge.endpoints.grpc.codec import nack_response, topic_of
from mq_bridge.endpoints.grpc.options import GrpcOptions
from mq_bridge.endpoints.grpc.proto import ACK, SERVICE, messages
from mq_bridge.errors import ConfigError, EndpointUnavailableError

__all__ = ["BridgeServer", "Pending", "TopicSink"]

log = logging.getLogger("mq_bridge.endpoints.grpc")

#: Threads serving RPCs: each unary Publish holds one while its message is being handled.
WORKERS = 64
MAX_RETAINED_PER_CONSUMER = 1024
MAX_RETAINED_CONSUMERS = 64
_END = object()


@dataclass(slots=True, eq=False)
class Pending:
    """A published message waiting for its route to settle it."""

    bridge: Any
    done: threading.Event = field(default_factory=threading.Event)
    response: Any = None

    def settle(self, response: Any) -> None:
        if not self.done.is_set():
            self.response = response
            self.done.set()

    def answer(self, timeout: float | None) -> Any:
        if not self.done.wait(timeout):
            return nack_response(self.bridge.id, "Timed out waiting for the route to commit")
        return self.response


class TopicSink(Protocol):
    """What a server-mode input offers the server: a queue for its topic's messages."""

    def offer(self, pending: Pending) -> bool: ...


class _Subscribers:
    """A topic's Subscribe streams and what each consumer id has not acknowledged."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.streams: dict[str, queue.Queue[Any]] = {}
        self.retained: OrderedDict[str, OrderedDict[str, Any]] = OrderedDict()

    def publish(self, bridge: Any) -> None:
        with self.lock:
            for consumer_id, stream in self.streams.items():
                kept = self.retained.setdefault(consumer_id, OrderedDict())
                kept[bridge.id] = bridge
                if len(kept) > MAX_RETAINED_PER_CONSUMER:
                    kept.popitem(last=False)
                    log.warning("grpc subscriber %s: too many unacknowledged messages", consumer_id)
                stream.put(bridge)

    def attach(self, consumer_id: str) -> tuple[queue.Queue[Any], list[Any]] | None:
        with self.lock:
            if consumer_id in self.streams:
                return None
            stream: queue.Queue[Any] = queue.Queue()
            self.streams[consumer_id] = stream
            if consumer_id not in self.retained:
                self.retained[consumer_id] = OrderedDict()
                while len(self.retained) > MAX_RETAINED_CONSUMERS:
                    self.retained.popitem(last=False)
            return stream, list(self.retained[consumer_id].values())

    def detach(self, consumer_id: str, stream: queue.Queue[Any], ephemeral: bool) -> None:
        """End `consumer_id`'s subscription `stream` (idempotent; a newer one stays)."""
        with self.lock:
            if self.streams.get(consumer_id) is not stream:
                return
            del self.streams[consumer_id]
            if ephemeral:
                self.retained.pop(consumer_id, None)
        stream.put(_END)

    def acknowledge(self, consumer_id: str, message_id: str, acked: bool) -> bool:
        with self.lock:
            kept = self.retained.get(consumer_id)
            if kept is None or message_id not in kept:
                return False
            if acked:
                del kept[message_id]
            return True

    def close(self) -> None:
        with self.lock:
            for stream in self.streams.values():
                stream.put(_END)


class BridgeServer:
    """A grpcio server for `options`' address, serving the topics registered with it."""

    def __init__(self, options: GrpcOptions) -> None:
        import grpc

        self._options = options
        self._commit_timeout = (options.timeout_ms or 0) / 1000 or None
        self._lock = threading.Lock()
        self._sinks: dict[str, TopicSink] = {}
        self._subscribers: dict[str, _Subscribers] = {}
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="mq-bridge-grpc")
        self._server = grpc.server(self._pool, options=channel_options(options, server=True))
        self._server.add_generic_rpc_handlers((self._handlers(grpc),))
        try:
            port = self._listen(options)
        except BaseException:
            self._pool.shutdown(wait=False)
            raise
        self.port = port
        self._server.start()

    def _listen(self, options: GrpcOptions) -> int:
        """Add the listening port; `EndpointUnavailableError` when it cannot be had."""
        cause: Exception | None = None
        try:
            if options.uses_tls:
                port = self._server.add_secure_port(options.target, server_credentials(options))
            else:
                port = self._server.add_insecure_port(options.target)
        except RuntimeError as error:  # grpcio >= 1.6x raises where older ones returned 0
            port, cause = 0, error
        if not port:
            reason = f": {cause}" if cause else " (address in use, or not a local address)"
            raise EndpointUnavailableError(f"grpc: cannot listen on {options.target}{reason}")
        return int(port)

    def _handlers(self, grpc: Any) -> Any:
        proto = messages()
        return grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "Publish": grpc.unary_unary_rpc_method_handler(
                    self._publish,
                    request_deserializer=proto.BridgeMessage.FromString,
                    response_serializer=proto.PublishResponse.SerializeToString,
                ),
                "PublishBatch": grpc.stream_stream_rpc_method_handler(
                    self._publish_batch,
                    request_deserializer=proto.BridgeMessage.FromString,
                    response_serializer=proto.PublishResponse.SerializeToString,
                ),
                "Subscribe": grpc.unary_stream_rpc_method_handler(
                    self._subscribe,
                    request_deserializer=proto.SubscribeRequest.FromString,
                    response_serializer=proto.BridgeMessage.SerializeToString,
                ),
                "Acknowledge": grpc.unary_unary_rpc_method_handler(
                    self._acknowledge,
                    request_deserializer=proto.Ack.FromString,
                    response_serializer=proto.AckResponse.SerializeToString,
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
            self._subscribers.setdefault(topic, _Subscribers())

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
        self._server.stop(grace=1.0).wait(5)
        self._pool.shutdown(wait=False)

    # ---- handlers -----------------------------------------------------------------

    def _dispatch(self, bridge: Any) -> Pending | Any:
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
        pending = Pending(bridge)
        if not sink.offer(pending):
            return nack_response(bridge.id, "Internal queue closed")
        return pending

    def _publish(self, request: Any, context: Any) -> Any:
        outcome = self._dispatch(request)
        if not isinstance(outcome, Pending):
            return outcome
        return outcome.answer(self._commit_timeout)

    def _publish_batch(self, requests: Iterator[Any], context: Any) -> Iterator[Any]:
        outcomes: queue.Queue[Any] = queue.Queue(maxsize=1024)

        def dispatch() -> None:
            try:
                for request in requests:
                    outcomes.put(self._dispatch(request))
            except Exception as error:  # the client went away, or sent garbage
                log.debug("grpc PublishBatch: request stream ended: %s", error)
            finally:
                outcomes.put(_END)

        threading.Thread(target=dispatch, name="mq-bridge-grpc-batch", daemon=True).start()
        while (outcome := outcomes.get()) is not _END:
            yield outcome.answer(self._commit_timeout) if isinstance(outcome, Pending) else outcome

    def _subscribe(self, request: Any, context: Any) -> Iterator[Any]:
        import grpc

        topic = request.topic.strip() or "default"
        ephemeral = not request.consumer_id
        consumer_id = request.consumer_id or str(uuid.uuid4())
        with self._lock:
            subscribers = self._subscribers.get(topic)
        if subscribers is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"No active gRPC topic '{topic}'")
        attached = subscribers.attach(consumer_id)  # type: ignore[union-attr]
        if attached is None:
            context.abort(
                grpc.StatusCode.ALREADY_EXISTS,
                f"gRPC consumer_id '{consumer_id}' already has an active subscription on "
                f"topic '{topic}'",
            )
        stream, replay = attached  # type: ignore[misc]
        # A cancelled or broken stream frees its consumer id at once (not at the next poll),
        # so the subscriber may come back under the same id right away.
        context.add_callback(lambda: subscribers.detach(consumer_id, stream, ephemeral))  # type: ignore[union-attr]
        context.send_initial_metadata(())  # the subscriber knows at once it was accepted
        try:
            seen = {bridge.id for bridge in replay}
            yield from replay
            while context.is_active():
                try:
                    bridge = stream.get(timeout=0.5)
                except queue.Empty:
                    continue
                if bridge is _END:
                    return
                if bridge.id not in seen:
                    yield bridge
        finally:
            subscribers.detach(consumer_id, stream, ephemeral)  # type: ignore[union-attr]

    def _acknowledge(self, request: Any, context: Any) -> Any:
        proto = messages()
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
