"""The ``mqb.src.*`` metadata: where an input found a message (its source cursor).

mq-bridge's rules, which every endpoint follows:

- an input adds its cursor fields only when source metadata is enabled: the runtime reads
  ``MQB_SOURCE_METADATA`` once (`source_metadata_enabled`) and hands the flag to inputs;
- ``mqb.src.*`` keys arriving from the wire are always dropped (a peer could forge them);
- every output strips ``mqb.src.*`` before sending.

The fields, by input (``with_source`` takes the names without the prefix):

    kafka   mqb.src.kafka_topic, mqb.src.kafka_partition, mqb.src.kafka_offset
    nats    mqb.src.nats_subject, mqb.src.nats_stream_sequence (JetStream only)
    amqp    mqb.src.amqp_exchange, mqb.src.amqp_routing_key, mqb.src.amqp_delivery_tag
    mqtt    mqb.src.mqtt_topic
    zeromq  mqb.src.zeromq_topic
    ibmmq   mqb.src.ibmmq_queue
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = [
    "SOURCE_METADATA_ENV",
    "SOURCE_PREFIX",
    "drop_source_keys",
    "source_metadata_enabled",
    "with_source",
]

SOURCE_PREFIX = "mqb.src."
SOURCE_METADATA_ENV = "MQB_SOURCE_METADATA"
_TRUE = frozenset({"1", "true", "yes"})


def source_metadata_enabled(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether ``MQB_SOURCE_METADATA`` is 1, true or yes (any case). Off by default."""
    return environ.get(SOURCE_METADATA_ENV, "").strip().lower() in _TRUE


def drop_source_keys(metadata: dict[str, str]) -> dict[str, str]:
    """`metadata` without ``mqb.src.*`` keys: the same dict when it has none (no copy)."""
    for key in metadata:
        if key.startswith(SOURCE_PREFIX):
            break
    else:
        return metadata
    return {key: value for key, value in metadata.items() if not key.startswith(SOURCE_PREFIX)}


def with_source(
    metadata: dict[str, str], fields: Mapping[str, object], enabled: bool
) -> dict[str, str]:
    """`metadata` cleared of inbound ``mqb.src.*`` keys, plus ``mqb.src.<name>`` for each
    of `fields` when `enabled` (values as text; None values left out).

    >>> with_source({"k": "v"}, {"kafka_topic": "orders", "kafka_offset": 7}, enabled=True)
    {'k': 'v', 'mqb.src.kafka_topic': 'orders', 'mqb.src.kafka_offset': '7'}
    """
    metadata = drop_source_keys(metadata)
    if not enabled:
        return metadata
    added = {
        SOURCE_PREFIX + name: str(value) for name, value in fields.items() if value is not None
    }
    return {**metadata, **added}
