"""The one registry of endpoints: config name -> module, imported only when used.

Each endpoint module exposes::

    OPTIONS: type[Options]                         the declaration of its options (pydantic)
    build_input(options, context) -> InputEndpoint     (when it can be an input)
    build_output(options, context) -> OutputEndpoint   (when it can be an output)

where ``options`` is the (already validated) value under the endpoint's name in a config,
e.g. ``{"topic": "orders", "capacity": 1600}`` for ``{"memory": {...}}``, and ``context``
is a `mq_bridge.endpoints.base.BuildContext`. A module whose driver is an optional
dependency imports it inside the build functions and, when it is missing, raises
`ConfigError` naming the ``pip install 'twainmq[extra]'`` that fixes it.
"""

from __future__ import annotations

ENDPOINT_MODULES: dict[str, str] = {
    # name in config -> module path (one module per registration)
    "memory": "mq_bridge.endpoints.memory",
    "null": "mq_bridge.endpoints.null",
    "response": "mq_bridge.endpoints.response",
    "static": "mq_bridge.endpoints.static",
    "fanout": "mq_bridge.endpoints.fanout",
    "switch": "mq_bridge.endpoints.switch",
    "file": "mq_bridge.endpoints.file",
    "twain": "mq_bridge.endpoints.twain",
    "nats": "mq_bridge.endpoints.nats",
    "mqtt": "mq_bridge.endpoints.mqtt",
    "redis_streams": "mq_bridge.endpoints.redis.streams",
    "redis": "mq_bridge.endpoints.redis.pubsub",
    "amqp": "mq_bridge.endpoints.amqp",
    "mongodb": "mq_bridge.endpoints.mongodb",
    "custom": "mq_bridge.endpoints.custom",
    "ref": "mq_bridge.endpoints.ref",
    "reader": "mq_bridge.endpoints.reader",
    "stream_buffer": "mq_bridge.endpoints.memory.stream_buffer",
    "sled": "mq_bridge.endpoints.twain.sled",
    "ibmmq": "mq_bridge.endpoints.ibmmq",
    "kafka": "mq_bridge.endpoints.kafka",
    "zeromq": "mq_bridge.endpoints.zeromq",
    "grpc": "mq_bridge.endpoints.grpc",
    "http": "mq_bridge.endpoints.http",
    "websocket": "mq_bridge.endpoints.websocket",
    "sqlx": "mq_bridge.endpoints.sqlx",
    "aws": "mq_bridge.endpoints.aws",
}
