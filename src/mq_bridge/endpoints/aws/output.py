"""The aws output: SendMessageBatch to an SQS queue and/or PublishBatch to an SNS topic."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from mq_bridge.endpoints.aws.client import AwsClients, acquire_clients, raise_translated
from mq_bridge.endpoints.aws.codec import (
    Encoded,
    Encoder,
    InvalidMessageError,
    entry_failure,
    split_batches,
)
from mq_bridge.endpoints.aws.destinations import open_queue, open_topic
from mq_bridge.endpoints.aws.options import AwsOptions
from mq_bridge.endpoints.base import BuildContext, EndpointStatus, OutputEndpoint
from mq_bridge.errors import ClosedError, ConfigError, EndpointError, SendError
from mq_bridge.message import Message

if TYPE_CHECKING:
    from mq_bridge.endpoints.kit.connections import Lease

__all__ = ["AwsOutput"]

Failures = dict[int, BaseException]


class _Destination:
    """One queue or topic: how to encode for it and how to send one batch call."""

    def __init__(
        self,
        service: str,
        encoder: Encoder,
        call: Callable[[list[dict[str, Any]]], dict[str, Any]],
        entry: Callable[[Encoded, str], dict[str, Any]],
        where: str,
    ) -> None:
        self.service = service
        self.encoder = encoder
        self.call = call
        self.entry = entry
        self.where = where

    def send(self, messages: Sequence[Message]) -> Failures:
        """Send every message; the failed ones by index (never a silent drop)."""
        failures: Failures = {}
        encoded: list[tuple[int, Encoded]] = []
        for index, message in enumerate(messages):
            try:
                encoded.append((index, self.encoder.encode(message)))
            except InvalidMessageError as error:
                failures[index] = error
        stop: BaseException | None = None
        for batch in split_batches(encoded):
            if stop is not None:
                failures.update((index, stop) for index, _ in batch)
                continue
            batch_failures = self._send_batch(batch)
            failures.update(batch_failures)
            if batch_failures and self.encoder.fifo:
                # Later messages must not overtake a failed one: they fail too (retried in
                # order by the route).
                stop = next(iter(batch_failures.values()))
            elif batch_failures and len(batch_failures) == len(batch):
                first = next(iter(batch_failures.values()))
                if not isinstance(first, InvalidMessageError):
                    stop = first  # the server is away: do not wait for it batch after batch
        return failures

    def _send_batch(self, batch: list[tuple[int, Encoded]]) -> Failures:
        entries = [self.entry(encoded, str(k)) for k, (_, encoded) in enumerate(batch)]
        try:
            answer = self.call(entries)
        except Exception as error:
            try:
                raise_translated(error, self.where)
            except ConfigError:
                raise
            except Exception as translated:
                return {index: translated for index, _ in batch}
        failures: Failures = {}
        for failure in answer.get("Failed", ()):
            failures[batch[int(failure["Id"])][0]] = entry_failure(failure, self.service)
        answered = {str(s.get("Id")) for s in answer.get("Successful", ())}
        for k, (index, _) in enumerate(batch):
            if index not in failures and str(k) not in answered:
                failures[index] = EndpointError(
                    f"{self.where}: {self.service} gave no answer for the message; not sent"
                )
        return failures


class AwsOutput(OutputEndpoint):
    """Sends to the queue `queue_url` (SendMessageBatch) and/or the topic `topic_arn`
    (PublishBatch), 10 messages and at most 256 KiB a call, in order.

    `send` returns once SQS/SNS answered every call and accepted every message. A message
    it refused, or one that it could not carry (checked first, so one bad message does not
    fail its batch), fails alone in a `SendError`: retriable unless it would fail again. On
    a FIFO queue or topic a failure also fails the messages after it, so that a retry keeps
    their order. With both a queue and a topic, a message goes to the queue first; a
    retry after the topic failed may send it to the queue again (at least once).
    """

    def __init__(self, options: AwsOptions, context: BuildContext) -> None:
        if options.queue_url is None and options.topic_arn is None:
            raise ConfigError(
                "an aws output needs `queue_url` (SQS) or `topic_arn` (SNS)", path="aws"
            )
        self._options = options
        self._context = context
        self._where = options.describe()
        self._lease: Lease[AwsClients] | None = None
        self._destinations: list[_Destination] = []
        self._closed = False

    def connect(self) -> None:
        """Find the queue and/or topic (which proves the server answers)."""
        self._closed = False
        if self._lease is not None:
            return
        lease = acquire_clients(self._options, self._context.connections)
        try:
            self._destinations = self._open(lease.connection)
        except BaseException:
            lease.release()
            raise
        self._lease = lease

    def _open(self, clients: AwsClients) -> list[_Destination]:
        options, where = self._options, self._where
        destinations = []
        if options.queue_url is not None:
            sqs = clients.sqs()
            queue = open_queue(sqs, options.queue_url, where)
            encoder = Encoder(
                options.binary_payload_mode,
                queue.fifo,
                queue.content_deduplication,
                options.message_group_id,
            )

            call = clients.sqs_call()

            def send_to_queue(entries: list[dict[str, Any]]) -> dict[str, Any]:
                return call("SendMessageBatch", {"QueueUrl": queue.url, "Entries": entries})

            destinations.append(
                _Destination("SQS", encoder, send_to_queue, Encoded.sqs_entry, where)
            )
        if options.topic_arn is not None:
            sns = clients.sns()
            topic = open_topic(sns, options.topic_arn, where)
            encoder = Encoder(
                options.binary_payload_mode,
                topic.fifo,
                topic.content_deduplication,
                options.message_group_id,
            )

            def publish(entries: list[dict[str, Any]]) -> dict[str, Any]:
                return sns.publish_batch(TopicArn=topic.arn, PublishBatchRequestEntries=entries)

            destinations.append(_Destination("SNS", encoder, publish, Encoded.sns_entry, where))
        return destinations

    def _connected(self) -> list[_Destination]:
        if self._closed:
            raise ClosedError(f"{self._where} output is closed")
        if self._lease is None:  # a reconnect failed earlier: try again (retriable)
            self.connect()
        return self._destinations

    def send(self, messages: Sequence[Message]) -> None:
        if not messages:
            self._connected()
            return
        failures: Failures = {}
        for destination in self._connected():
            for index, error in destination.send(messages).items():
                failures.setdefault(index, error)
        if not failures:
            return
        errors = set(map(id, failures.values()))
        if len(failures) == len(messages) and len(errors) == 1:
            raise next(iter(failures.values()))  # the whole batch, one cause: a plain error
        raise SendError(failures)

    def send_one(self, message: Message) -> None:
        self.send((message,))

    def status(self) -> EndpointStatus:
        healthy = self._lease is not None
        error = None if healthy else ("closed" if self._closed else "not connected")
        details = {"destinations": [d.service for d in self._destinations]}
        return EndpointStatus(healthy=healthy, target=self.describe(), error=error, details=details)

    def describe(self) -> str:
        return self._where

    def close(self) -> None:
        self._closed = True
        lease, self._lease = self._lease, None
        self._destinations = []
        if lease is not None:
            lease.release()
