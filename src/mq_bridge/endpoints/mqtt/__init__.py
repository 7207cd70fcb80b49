"""mqtt: MQTT 5 and 3.1.1 topics (input: paho-mqtt 2; output: a synchronous client of ours).

`options` declares the options, `client` wraps the paho client (the input's, and the
output's for WebSockets and requests), `publisher` is the output's own client (driven by
the sending thread), `wire` its packets, `input` and `output` the endpoints, `codec` the
message format (mq-bridge's), `replies` v5 request/reply.

Features
    - Output: publishes at `qos` (default 1). `send` returns once the broker acknowledged
      every message (PUBACK at QoS 1, PUBCOMP at QoS 2; QoS 0: written to the socket); a
      batch is pipelined within `max_inflight` (or the broker's Receive Maximum, if
      smaller). Outputs of a process with the same server settings share one connection.
    - Input: subscribes `topic` (wildcards allowed) at `qos`; messages are PUBACKed only
      when their batch is acked (paho's ``manual_ack``), or on receipt with `delayed_ack`.
      `nack` hands the batch out again at once, in order (still unacknowledged at the
      broker). `clean_session: false` (the default) is a persistent, queue-like session:
      what was not acknowledged (nacked, in flight, or queued while the input was away)
      is redelivered when it reconnects, after a crash or a broker restart included.
    - Backpressure never hangs: at most `max_inflight` (default `queue_capacity`, 100)
      unacknowledged messages are in flight, so the buffer is bounded and
      ``poll(timeout_ms=...)`` always returns; a backlog larger than that is drained batch
      by batch as batches are committed.
    - v5: metadata <-> user properties, the id in the ``mq_bridge.message_id`` property;
      ``ResponseTopic``/``CorrelationData`` <-> ``reply_to``/``correlation_id`` metadata;
      `Publisher.request` waits on a private reply topic, and a route with a `response`
      output answers requests it receives. v3: metadata and id travel in a JSON envelope
      in the payload (a message without metadata as its bare payload), as mq-bridge does.
    - With ``MQB_SOURCE_METADATA=1`` inputs add ``mqb.src.mqtt_topic``.
    - `status()`: ``pending`` is None (MQTT reports no backlog); ``details`` has the
      buffered and unacknowledged counts.
    - A lost connection: the input's is reconnected by paho's thread with backoff (0.1 s
      to 5 s); the output fails the unacknowledged messages with `EndpointUnavailableError`
      (retriable; `SendError` naming them when part of a batch was acknowledged), and
      the next send connects again (within 5 s, or the same error).

URL
    tcp://host:1883 (also mqtt://, host:port), mqtts:// / ssl:// for TLS (or a `tls`
    block), ws:// / wss:// for websockets; user:password@ in it works as the options do.

Options (declared in `options.py`, `MqttOptions`; mq-bridge's `MqttConfig`)
    url                      the broker (required)
    topic                    the topic (required; an input's may be a filter)
    username, password       credentials (password is a secret)
    tls                      the TLS block (kit.tls)
    client_id                input default: ``mqb-<route name>`` for a persistent session,
                             random for a clean one; outputs append ``-pub-<random>``
    qos                      0, 1 or 2 (default 1)
    clean_session            input: false (default) = persistent session; true = ephemeral
    session_expiry_interval  v5 persistent session lifetime in seconds (default: never)
    keep_alive_seconds       default 20
    protocol                 v5 (default) or v3 (also V5/V3/5/3/3.1.1)
    queue_capacity           input buffer (default 100)
    max_inflight             unacknowledged messages in flight (default queue_capacity)
    delayed_ack              input: acknowledge on receipt (at most once; default false)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mq_bridge.endpoints.base import BuildContext
from mq_bridge.endpoints.mqtt.options import MqttOptions

if TYPE_CHECKING:
    from mq_bridge.endpoints.mqtt.input import MqttInput
    from mq_bridge.endpoints.mqtt.output import MqttOutput

__all__ = ["OPTIONS", "build_input", "build_output"]

OPTIONS = MqttOptions


def build_input(options: MqttOptions, context: BuildContext) -> MqttInput:
    """A subscriber of `topic` (a persistent session unless `clean_session`)."""
    from mq_bridge.endpoints.mqtt.input import MqttInput

    return MqttInput(options, context)


def build_output(options: MqttOptions, context: BuildContext) -> MqttOutput:
    """A publisher to `topic`."""
    from mq_bridge.endpoints.mqtt.output import MqttOutput

    return MqttOutput(options, context)
