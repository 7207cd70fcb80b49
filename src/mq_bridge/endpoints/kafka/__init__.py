"""kafka: Kafka topics through librdkafka (confluent-kafka), as mq-bridge's `kafka` endpoint.

Features
    - Input, group mode (`group_id`): a consumer-group member; a new group starts at the
      earliest offset. Commits of offset+1 per partition for each acked batch (stored for
      librdkafka's 100 ms interval commit, or sent at once with ``enable.auto.commit=false``;
      confirmed by a later read; synchronous before a rebalance, `status()` and close);
      acks are cumulative, so they must follow receive order
      (`Consumer.ack(token)` out of order raises). `nack` seeks back: the batch comes again
      at once, in order. Partitions about to move in a rebalance first get what was acked
      committed.
    - Input, subscriber mode (no `group_id`): an ephemeral group that reads only what is
      published after `connect()` returns; nothing is committed.
    - Output: an idempotent producer (acks=all, lz4, linger.ms 5 by default;
      `producer_options` override). `send` returns once every record of the batch has its
      delivery report (it flushes, so a single send never waits out the linger);
      `delayed_ack` returns once librdkafka has the records. Record key = the message id
      (16 bytes), or the `partition_key` metadata value. One producer per connection
      settings is shared by the process's outputs (`shared`).
    - Topics are created when missing (`create_topic`, `partitions`), by inputs too, so a
      consumer started first receives what is published later.
    - Wire: metadata <-> headers, the id in ``mq_bridge.message_id`` (32 hex digits), as
      mq-bridge writes them; a record without it gets a stable id from its position.
      Tombstones (null values) read as an empty payload with ``mqb.kafka.tombstone: "true"``,
      and are written back as tombstones. With ``MQB_SOURCE_METADATA=1`` (or
      `source_metadata`) inputs add ``mqb.src.kafka_topic``, ``mqb.src.kafka_partition``
      and ``mqb.src.kafka_offset``.
    - `status().pending`: the group's lag (end offsets minus committed offsets).
    - Request/reply, emulated: `Publisher.request` produces with ``reply_to`` (a private
      reply topic) and ``correlation_id`` and waits there; a route whose input receives such
      a request answers through its `response` output (see `replies`).
    - Failures: `connect()` fails within 10 s when no broker answers
      (`EndpointUnavailableError`) and at once on a bad setting (`ConfigError` naming the
      option). Losing every broker fails the next `receive` (retriable); the route
      reconnects and resumes from the committed offsets.

Modules: `options`, `client` (librdkafka settings, errors, topics, the shared producer),
`codec` (records <-> messages), `commits` (owned partitions and acked offsets), `input`,
`output`, `replies` (request/reply). Nothing here imports confluent-kafka until an endpoint
connects.

URL
    host:port[,host2:port...]; kafka://, ssl:// or sasl_ssl:// schemes and
    ``user:password@`` userinfo (SASL PLAIN) are accepted

Options (declared in `options.py`, `KafkaOptions`; mq-bridge's names)
    url                 the brokers (required)
    topic               the topic (default: the route's name); inputs: a list or ^regex
    group_id            input: the consumer group (none: subscriber mode)
    username, password  SASL PLAIN credentials;  tls  the TLS block (ssl://... too)
    delayed_ack         output: do not wait for delivery reports (default false)
    producer_options, consumer_options   librdkafka settings, as [key, value] pairs
    shared              output: share the producer (default true)
    partitions          partitions of a topic it creates (default 6)
    create_topic        create a missing topic (default true)
    partition_key       output: the metadata field used as record key (default: the id)
    source_metadata     input: add mqb.src.kafka_* (default false)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mq_bridge.endpoints.base import BuildContext
from mq_bridge.endpoints.kafka.options import KafkaOptions

if TYPE_CHECKING:
    from mq_bridge.endpoints.kafka.input import KafkaInput
    from mq_bridge.endpoints.kafka.output import KafkaOutput

__all__ = ["OPTIONS", "build_input", "build_output"]

OPTIONS = KafkaOptions


def build_input(options: KafkaOptions, context: BuildContext) -> KafkaInput:
    """A consumer-group member (`group_id`), or a subscriber of new records."""
    from mq_bridge.endpoints.kafka.input import KafkaInput

    return KafkaInput(options, context)


def build_output(options: KafkaOptions, context: BuildContext) -> KafkaOutput:
    """An idempotent producer to `topic`."""
    from mq_bridge.endpoints.kafka.output import KafkaOutput

    return KafkaOutput(options, context)
