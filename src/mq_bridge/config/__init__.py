"""Config documents for mq_bridge: schema, loading, validation and typed shapes.

`config_schema()` is the JSON Schema of a document, assembled from the registered
endpoint and middleware modules. The ``TypedDict`` s re-exported here (``ConfigDocument``,
``RouteConfig``, ``EndpointConfig``, one per endpoint and middleware) are generated from
it by ``scripts/gen_config_types.py``; a test fails when they drift.
"""

from mq_bridge.config.redaction import redact
from mq_bridge.config.schema import config_schema
from mq_bridge.config.types import *  # noqa: F403
from mq_bridge.config.types import __all__ as _type_names

__all__ = ["config_schema", "redact", *_type_names]
