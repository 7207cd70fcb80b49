"""The one registry of middleware: config name -> module, imported only when used.

Each middleware module exposes ``OPTIONS`` (its option declaration, a pydantic model:
see `mq_bridge.config.declarations`) and ``wrap_input`` and/or ``wrap_output``
(see `mq_bridge.middleware.base`), which receive the parsed options.
"""

from __future__ import annotations

MIDDLEWARE_MODULES: dict[str, str] = {
    # name in config -> module path (one module per middleware)
    "retry": "mq_bridge.middleware.retry",
    "dlq": "mq_bridge.middleware.dlq",
    "deduplication": "mq_bridge.middleware.deduplication",
    "metrics": "mq_bridge.middleware.metrics",
    "delay": "mq_bridge.middleware.delay",
    "limiter": "mq_bridge.middleware.limiter",
    "random_panic": "mq_bridge.middleware.random_panic",
    "buffer": "mq_bridge.middleware.buffer",
    "weak_join": "mq_bridge.middleware.weak_join",
    "custom": "mq_bridge.middleware.custom",
    "cookie_jar": "mq_bridge.middleware.cookie_jar",
}
