"""mq_bridge: routes, publishers and pull consumers over memory, files, the twainmq log
and real brokers, configured from YAML, JSON or dicts."""

from typing import Any

from mq_bridge.aio import AsyncConsumer, AsyncPublisher, AsyncRoute
from mq_bridge.consumer import Consumer
from mq_bridge.endpoints.memory.drainer import MemoryDrainer
from mq_bridge.errors import NonRetryableError, RetryableError
from mq_bridge.message import Message
from mq_bridge.middleware.metrics import metrics_snapshot
from mq_bridge.publisher import Publisher
from mq_bridge.route import Route
from mq_bridge.runtime.log_setup import init_logging

__version__ = "0.1.0"


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
]
