"""mq_bridge: routes, publishers and pull consumers over memory, files, the twainmq log
and real brokers, configured from YAML, JSON or dicts."""

import importlib
from typing import TYPE_CHECKING, Any

from mq_bridge.consumer import Consumer
from mq_bridge.errors import NonRetryableError, RetryableError
from mq_bridge.message import Message
from mq_bridge.publisher import Publisher
from mq_bridge.route import Route
from mq_bridge.runtime.log_setup import init_logging

if TYPE_CHECKING:
    from mq_bridge.aio import AsyncConsumer, AsyncPublisher, AsyncRoute
    from mq_bridge.endpoints.memory.drainer import MemoryDrainer
    from mq_bridge.endpoints.python.registry import (
        register_endpoint,
        register_middleware,
        unregister_endpoint,
        unregister_middleware,
    )
    from mq_bridge.middleware.metrics import metrics_snapshot

__version__ = "0.1.0"

#: Public names imported on first use, so that `import mq_bridge` stays cheap (asyncio,
#: pydantic and the endpoint declarations load only when something needs them).
_LAZY = {
    "AsyncConsumer": "mq_bridge.aio",
    "AsyncPublisher": "mq_bridge.aio",
    "AsyncRoute": "mq_bridge.aio",
    "MemoryDrainer": "mq_bridge.endpoints.memory.drainer",
    "metrics_snapshot": "mq_bridge.middleware.metrics",
    "register_endpoint": "mq_bridge.endpoints.python.registry",
    "unregister_endpoint": "mq_bridge.endpoints.python.registry",
    "register_middleware": "mq_bridge.endpoints.python.registry",
    "unregister_middleware": "mq_bridge.endpoints.python.registry",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mq_bridge' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def config_schema() -> dict[str, Any]:
    """The JSON Schema of config documents (routes, publishers, consumers), as a dict."""
    from mq_bridge.config.schema import config_schema as build  # imported when first needed

    return build()


__all__ = [
    "AsyncConsumer",
    "AsyncPublisher",
    "AsyncRoute",
    "Consumer",
    "MemoryDrainer",
    "Message",
    "NonRetryableError",
    "Publisher",
    "RetryableError",
    "Route",
    "__version__",
    "config_schema",
    "init_logging",
    "metrics_snapshot",
    "register_endpoint",
    "register_middleware",
    "unregister_endpoint",
    "unregister_middleware",
]
