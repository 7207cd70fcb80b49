"""amqp: RabbitMQ (AMQP 0-9-1) queues and fanout exchanges.

This module is the builders; `options` declares the options, `connection` runs pika on an
I/O thread per connection, `topology` declares queues and exchanges, `codec` maps
messages to AMQP properties, `publishing` tracks publisher confirms on pika, `direct` is
the output's publishing link driven by the sending thread (`frames` builds its frames),
`settlement` acks.

Features
    - Queue mode: a durable queue (transient with `no_persistence`) that competing
      consumers share; with an `exchange`, the queue is bound to that fanout exchange.
    - `subscribe_mode`: each input gets an exclusive, auto-deleted queue bound to the fanout
      `exchange`, so every subscriber gets every message published after it subscribed.
      A publisher of the same config publishes to that exchange (as both peers).
    - Output: persistent messages (``delivery_mode`` 2) with publisher confirms; a send
      returns once the broker confirmed every message of it. A batch is pipelined (all
      published, then all confirms awaited), by the sending thread on a connection of the
      output's own. `delayed_ack` skips the confirms (opt-in).
      Straight to a queue, the publish is ``mandatory``: a missing queue fails the send.
    - Input: manual acks, `prefetch_count` in flight; `receive` returns full batches from a
      backlog. Acks in any order (one ``multiple`` frame for a batch when it can); nack is
      ``basic.nack(requeue=true)``. A closed input requeues what it did not ack.
    - The message id travels as the AMQP ``message_id`` property, metadata as headers,
      ``correlation_id`` / ``reply_to`` metadata as those properties (mq-bridge's layout).
    - Request/reply: `Publisher.request` publishes with ``reply_to`` set to RabbitMQ's
      direct reply-to and waits for the reply with its ``correlation_id``; an output with
      neither `queue` nor `exchange` sends each message to its ``reply_to`` (a responder).
    - ``status().pending`` is the queue depth (ready messages, plus those prefetched and
      not yet handed out).
    - With ``MQB_SOURCE_METADATA=1`` (or `source_metadata`) inputs add
      ``mqb.src.amqp_exchange``, ``mqb.src.amqp_routing_key`` and
      ``mqb.src.amqp_delivery_tag``.
    - A lost connection is reopened by the next call that needs it; meanwhile calls raise
      `EndpointUnavailableError` (retriable), and unconfirmed sends fail the same way.

URL
    amqp://[user:password@]host[:port][/vhost] (amqps:// or a `tls` block for TLS); a
    trailing ``/`` or none means the vhost ``/``.

Options (declared in `options.py`, `AmqpOptions`)
    url               the server (required; userinfo in it is a secret)
    queue             the queue (input: required unless subscribe_mode)
    exchange          fanout exchange to publish to / bind the queue to
    subscribe_mode    input: a fan-out subscriber (default false)
    prefetch_count    input: unacked deliveries in flight (default 100; 0: no limit)
    no_persistence    transient queues and messages (default false)
    no_declare_queue  output: do not declare the queue (default false)
    delayed_ack       output: do not wait for publisher confirms (default false)
    source_metadata   input: add mqb.src.amqp_* (default false; or MQB_SOURCE_METADATA=1)
    username/password credentials, when not in the URL (password is a secret)
    tls               TLS block (see `mq_bridge.endpoints.kit.tls`)
    shared            share one connection per server and credentials (default true)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mq_bridge.endpoints.amqp.options import AmqpOptions
from mq_bridge.endpoints.base import BuildContext
from mq_bridge.errors import ConfigError

if TYPE_CHECKING:
    from mq_bridge.endpoints.amqp.input import AmqpInput
    from mq_bridge.endpoints.amqp.output import AmqpOutput

__all__ = ["OPTIONS", "build_input", "build_output"]

OPTIONS = AmqpOptions


def build_input(options: AmqpOptions, context: BuildContext) -> AmqpInput:
    """A consumer of `queue`, or a fan-out subscriber with ``subscribe_mode: true``."""
    from mq_bridge.endpoints.amqp.input import AmqpInput

    if not options.queue and not options.subscribe_mode:
        raise ConfigError("an amqp input needs a `queue` (or subscribe_mode)", path="amqp.queue")
    return AmqpInput(options, context)


def build_output(options: AmqpOptions, context: BuildContext) -> AmqpOutput:
    """A publisher to `queue` or `exchange` (or to each message's reply_to)."""
    from mq_bridge.endpoints.amqp.output import AmqpOutput

    return AmqpOutput(options, context)
