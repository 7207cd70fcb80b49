"""mq_bridge: routes, publishers and pull consumers over memory, files, the twainmq log
and real brokers, configured from YAML, JSON or dicts."""

from mq_bridge.errors import NonRetryableError, RetryableError
from mq_bridge.message import Message

__version__ = "0.1.0"

__all__ = ["Message", "NonRetryableError", "RetryableError", "__version__"]
