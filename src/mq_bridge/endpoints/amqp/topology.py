"""Declaring what an endpoint uses: its exchange, its queue and their binding.

    queue mode        a queue named `queue` (durable unless `no_persistence`); with an
                      `exchange` too, the (fanout) exchange and the queue bound to it
    subscribe_mode    the fanout exchange (`exchange`, else the queue's name) and an
                      exclusive, auto-deleted queue ``mq-bridge-<name>-<uuid>`` bound to it
                      (mq-bridge's naming): each subscriber gets every message; a publisher
                      declares only that exchange and publishes to it (no queue: one would
                      only collect what nobody reads), as both peers do
    publisher only    `no_declare_queue` skips the queue (it must exist)

Exchanges named ``amq.*`` are the broker's own and are never declared.
"""

from __future__ import annotations

import uuid

from mq_bridge.endpoints.amqp.connection import CONNECT_TIMEOUT, Channel
from mq_bridge.endpoints.amqp.options import AmqpOptions

__all__ = ["declare"]


def declare(channel: Channel, options: AmqpOptions, consumer: bool) -> str:
    """Declare what `options` use on `channel`; the name of the queue to consume."""
    pika, run = channel.pika, channel.run
    durable = not options.no_persistence
    subscriber = consumer and options.subscribe_mode
    exchange = options.fanout_exchange if options.subscribe_mode else options.exchange
    if exchange and not exchange.startswith("amq."):
        run(
            lambda done: pika.exchange_declare(exchange, "fanout", durable=durable, callback=done),
            CONNECT_TIMEOUT,
        )
    if subscriber:
        name = f"mq-bridge-{options.queue or exchange}-{uuid.uuid4()}"
        run(
            lambda done: pika.queue_declare(
                name, durable=False, exclusive=True, auto_delete=True, callback=done
            ),
            CONNECT_TIMEOUT,
        )
        run(lambda done: pika.queue_bind(name, exchange, "", callback=done), CONNECT_TIMEOUT)
        return name
    queue = None if options.subscribe_mode else options.queue
    if queue and (consumer or not options.no_declare_queue):
        timeout = CONNECT_TIMEOUT
        run(lambda done: pika.queue_declare(queue, durable=durable, callback=done), timeout)
        if exchange:
            run(lambda done: pika.queue_bind(queue, exchange, queue, callback=done), timeout)
    return queue or ""
