"""The `nats` input: a JetStream pull consumer (`pull`), or a core subscription
(`subscriber`) with `no_jetstream`; this module is their shared lifecycle."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mq_bridge.endpoints.base import Batch, BuildContext, EndpointStatus, InputEndpoint
from mq_bridge.endpoints.kit.drivers import require_driver
from mq_bridge.endpoints.nats.options import NatsOptions, queue_group
from mq_bridge.errors import ClosedError

if TYPE_CHECKING:
    from mq_bridge.endpoints.kit.connections import Lease
    from mq_bridge.endpoints.nats.connection import FastClient
    from mq_bridge.endpoints.nats.pull import PullReader
    from mq_bridge.endpoints.nats.subscriber import SubscriptionReader

__all__ = ["NatsInput"]

log = logging.getLogger("mq_bridge.endpoints.nats")


class NatsInput(InputEndpoint):
    """Reads a subject: JetStream through a pull consumer, or core NATS.

    `connect` after a failed or closed connection starts afresh, so a route's reconnect
    (close, then connect) works; until a `connect` succeeds, `receive` raises
    `EndpointUnavailableError` (retriable) after a failed one and `ClosedError` after
    `close`.
    """

    acks_in_any_order = True  # JetStream acks each message; core NATS has no acks

    def __init__(self, options: NatsOptions, context: BuildContext) -> None:
        self._options = options
        self._context = context
        self._tag_source = options.source_metadata or context.source_metadata
        self._lease: Lease[FastClient] | None = None
        self._reader: PullReader | SubscriptionReader | None = None
        self._closed = False
        self._failure: BaseException | None = None
        self.redelivers = not options.no_jetstream  # core NATS keeps nothing to redeliver

    def connect(self) -> None:
        if self._reader is not None:
            return
        require_driver("nats", endpoint="nats", extra="nats", package="nats-py")
        from mq_bridge.endpoints.nats.connection import acquire_client

        self._closed = False
        self._failure = None
        lease = acquire_client(self._options, self._context.connections)
        try:
            reader = self._start_reader(lease.connection)
        except BaseException as error:
            self._failure = error
            lease.release()
            raise
        self._lease, self._reader = lease, reader

    def _start_reader(self, client: FastClient) -> PullReader | SubscriptionReader:
        options = self._options
        subject = str(options.subject)
        if options.no_jetstream:
            from mq_bridge.endpoints.nats.subscriber import SubscriptionReader

            group = "" if options.subscriber_mode else queue_group(options.stream, subject)
            reader: PullReader | SubscriptionReader
            reader = SubscriptionReader(client, subject, group, self._context.replies)
        else:
            from mq_bridge.endpoints.nats import jetstream
            from mq_bridge.endpoints.nats.connection import run
            from mq_bridge.endpoints.nats.link import open_link
            from mq_bridge.endpoints.nats.pull import PullReader

            what = f"nats: setting up JetStream for {subject}"
            stream = run(jetstream.ensure_stream(client, options), what)
            consumer = run(jetstream.ensure_consumer(client, stream, options), what)
            link = open_link(options, client)
            reader = PullReader(client, link, stream, consumer, options.subscriber_mode)
        try:
            reader.start()
        except BaseException:
            reader.stop()
            raise
        return reader

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        return self._open().receive(max_messages, timeout, self._tag_source)

    def ack(self, batch: Batch) -> None:
        if batch.token:
            self._open().ack(batch)

    def nack(self, batch: Batch) -> None:
        if batch.token:
            self._open().nack(batch)

    def status(self) -> EndpointStatus:
        reader = self._reader
        if reader is None:
            error = "closed" if self._closed else repr(self._failure or "not connected")
            return EndpointStatus(False, self.describe(), error=error)
        return reader.status(self.describe())

    def describe(self) -> str:
        return self._options.describe()

    def interrupt(self) -> None:
        reader = self._reader
        if reader is not None:
            reader.interrupt()

    def close(self) -> None:
        reader, self._reader = self._reader, None
        lease, self._lease = self._lease, None
        self._closed = True
        try:
            if reader is not None:
                reader.interrupt()
                reader.stop()
        finally:
            if lease is not None:
                lease.release()

    def _open(self) -> Any:
        reader = self._reader
        if reader is not None:
            return reader
        if self._closed:
            raise ClosedError(f"{self.describe()} is closed")
        from mq_bridge.errors import EndpointUnavailableError

        raise EndpointUnavailableError(f"{self.describe()} is not connected: {self._failure!r}")
